"""The parts of CUDA sessions that need no GPU: bucket choice, per-bucket kernel variants and the
packing of kernel arguments for cuLaunchKernel."""

from __future__ import annotations

import ctypes
from dataclasses import replace

import pytest

from inferx.runtime.cuda_driver import I32, PTR, pack_args
from inferx.runtime.cuda_session import bucket_of, buckets_of
from inferx.runtime.manifest import LaunchStep, MemoryPlan, PlanBucket
from inferx.runtime.session import SessionError


def test_bucket_of_takes_the_smallest_that_holds() -> None:
    assert [bucket_of(n, [1, 4, 16], "batch") for n in (1, 2, 4, 5, 16)] == [1, 4, 4, 16, 16]
    with pytest.raises(SessionError, match="batch 17 exceeds the largest compiled bucket 16"):
        bucket_of(17, [1, 4, 16], "batch")


def test_buckets_come_from_the_memory_plan() -> None:
    plan = MemoryPlan("", tuple(PlanBucket({"batch": b, "ctx": 64}, 0, 0, 0) for b in (1, 4)))
    assert buckets_of({"decode": plan, "prefill": None}, "batch", 6) == [1, 4, 6]
    assert buckets_of({}, "batch", 20) == [1, 4, 16, 20]


def test_kernel_for_picks_the_variant_of_the_batch_bucket() -> None:
    step = LaunchStep("a", (), (), by_rows=((1, "a"), (4, "b"), (16, "c")))
    assert [step.kernel_for(b, 1) for b in (1, 2, 4, 5, 16, 17)] == ["a", "b", "b", "c", "c", "c"]
    assert step.kernel_for(1, 4) == "b"  # a prefill launch's rows are batch x seq
    assert replace(step, rows="batch").kernel_for(1, 4) == "a"  # a decode kernel's the batch's alone
    assert LaunchStep("only", (), ()).kernel_for(7, 1) == "only"


def test_pack_args_points_at_each_value() -> None:
    array, storage = pack_args([0x1234_5678_9ABC, 7, -3], [PTR, I32, I32])
    addrs = [array[i] for i in range(3)]
    assert ctypes.c_uint64.from_address(addrs[0]).value == 0x1234_5678_9ABC
    assert ctypes.c_int32.from_address(addrs[1]).value == 7
    assert ctypes.c_int32.from_address(addrs[2]).value == -3
    assert len(storage) == 3
