"""Runners: measure schedules of a task. ``measure(task, schedules)`` returns one ``MeasureResult``
per schedule, in order; a candidate that fails to generate, compile, launch or time is an infinite
time with the error's text, never an exception.

- ``ReplayRunner`` (trivial) answers from recorded measurements (tuning-database records); a
  schedule nobody recorded is infinite, "not recorded". The search and the cost models are tested
  on the CPU through it.
- ``LocalRunner`` measures on the local GPU: the task's kernel (of any tunable family) generated
  under each schedule,
  compiled in worker processes in parallel (each worker checks the cubin's shared memory and warms
  Triton's cache, so the parent only loads), then timed one candidate at a time: a CUDA graph of
  launches that cycle through enough copies of every operand that the L2 (50 MB) never holds the
  next launch's data, replayed after warm-up, CUDA events around each replay; the time of one
  launch is the median replay over the launches in it. Attention operands are a full context:
  every sequence's ``kv_lens`` is the task's context (decode: the query at its last position;
  prefill: one prompt of the task's rows at positions 0..rows-1). Before it is timed, each
  candidate's results are compared with the template's heuristic schedule on the same seeded
  operands (``wrong_results``): a schedule the compiler miscompiles is a failure, never a record.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from xdsl.ir import BlockArgument

from inferx.autotune.space import schedule_key
from inferx.compiler.database import Record, regime_of
from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.interface import AnyTask
from inferx.compiler.ir.ops_kernel import KernelOp

INF = float("inf")
OUT_OF_TIME = "the time budget ran out before it was built and timed"


@dataclass(frozen=True)
class MeasureResult:
    """``median_ms`` of ``times_ms`` (inf with ``error`` set when the candidate failed);
    ``toolchain`` is what the time was measured with; ``note`` says what one time covers."""

    median_ms: float
    times_ms: tuple[float, ...] = ()
    error: str = ""
    toolchain: dict[str, str] = field(default_factory=dict)
    note: str = ""

    @property
    def ok(self) -> bool:
        return math.isfinite(self.median_ms) and not self.error

    # False for a candidate that was never tried (the GPU was lost before it): not a failure of
    # the schedule, so never recorded as one
    tried: bool = True
    regime: str = ""  # the record's regime (``database.REGIMES``): "sustained" at power-capped clocks

    @staticmethod
    def failed(error: str) -> MeasureResult:
        return MeasureResult(INF, (), error or "failed")

    @staticmethod
    def untried(why: str) -> MeasureResult:
        return MeasureResult(INF, (), f"not measured: {why}", tried=False)


class Runner(Protocol):
    name: str

    def measure(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> list[MeasureResult]: ...


# --- replay ------------------------------------------------------------------------------------


@dataclass
class ReplayRunner:
    """Answers from records of one ``regime`` (``database.REGIMES``; burst timings by default: a
    schedule's sustained time is another quantity); ``measured`` counts the schedules asked for
    (every call, not only the recorded ones), which is what a search's cost in measurements is."""

    records: Sequence[Record]
    name: str = "replay"
    measured: int = 0
    regime: str = ""
    _index: dict[tuple[str, str], Record] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.records = [r for r in self.records if r.regime == self.regime]
        for r in self.records:  # the fastest record of a (task, schedule) wins
            key = (r.task.key, schedule_key(r.schedule))
            if key not in self._index or r.median_ms < self._index[key].median_ms:
                self._index[key] = r

    @staticmethod
    def from_files(paths: Sequence[Path | str]) -> ReplayRunner:
        """Records from jsonl files, or from every ``*.jsonl`` under a directory (a tuning-database
        target folder); ValueError naming the file and line of a line that is not a record."""
        records: list[Record] = []
        for p in paths:
            path = Path(p)
            files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
            for f in files:
                for n, line in enumerate(f.read_text().splitlines(), 1):
                    if line.strip():
                        try:
                            records.append(Record.from_json(json.loads(line)))
                        except ValueError as e:
                            raise ValueError(f"{f}:{n}: {e}") from None
        return ReplayRunner(records, name=f"replay:{','.join(str(p) for p in paths)}")

    def tasks(self) -> list[AnyTask]:
        """The tasks with recorded measurements, in first-seen order."""
        seen: dict[str, AnyTask] = {}
        for r in self.records:
            seen.setdefault(r.task.key, r.task)
        return list(seen.values())

    def measure(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> list[MeasureResult]:
        out = []
        for s in schedules:
            self.measured += 1
            rec = self._index.get((task.key, schedule_key(s)))
            if rec is None:
                out.append(MeasureResult.failed("not recorded"))
            elif not math.isfinite(rec.median_ms):
                out.append(MeasureResult(INF, rec.times_ms, rec.note or "recorded as failed", rec.toolchain))
            else:
                note = f"replayed from {rec.source or 'a record'} of {rec.date}" + (f": {rec.note}" if rec.note else "")
                out.append(MeasureResult(rec.median_ms, rec.times_ms, "", dict(rec.toolchain), note,
                                         regime=rec.regime))
        return out


# --- the local GPU -----------------------------------------------------------------------------


def rotation_count(set_bytes: int, l2_bytes: int = H200.l2_bytes, max_bytes: int = 8 << 30,
                   max_sets: int = 64) -> int:
    """Copies of a launch's operands to cycle through so that, when a copy comes round again,
    at least twice the L2's size has been read since: 1 for sets of 2 x L2 or more; never more
    than ``max_sets`` nor more than fit in ``max_bytes`` (but always 1)."""
    if set_bytes <= 0:
        raise ValueError(f"an operand set has a positive size, got {set_bytes}")
    want = math.ceil(2 * l2_bytes / set_bytes)
    return max(1, min(want, max_sets, max_bytes // set_bytes))


def launches_per_graph(sets: int, at_least: int = 8) -> int:
    """Launches captured in one timed graph: whole cycles over the ``sets`` copies, at least
    ``at_least`` launches, so the graph's own launch cost is shared."""
    return sets * math.ceil(at_least / sets)


def cycled_launch_ms(launches: Sequence[Any], warmup: int, repeats: int) -> float:
    """The median milliseconds a launch of ``launches`` (``inferx.runtime.plan.Launch``, each over
    its own copy of the operands) takes when a CUDA graph cycles through them (``graph_times``)."""
    import torch

    from inferx.runtime.plan import run

    cycle = [launches[j % len(launches)] for j in range(launches_per_graph(len(launches)))]
    run(cycle)
    torch.cuda.synchronize()
    return statistics.median(graph_times(lambda: run(cycle), len(cycle), warmup, repeats))


def bench_env(task: AnyTask, ctx: int = 576) -> dict[str, int]:
    """Symbol values a task is measured at: its row bucket as the batch (decode) or the sequence
    (prefill, one sequence), and a KV context of ``ctx`` (at least the prefill's length); an
    attention task (the fused attention and o projection's too) at its own context."""
    own_ctx = getattr(task, "ctx", None)  # a task keyed by its context (attention's)
    if own_ctx is not None:
        ctx = max(own_ctx, task.rows if task.shape == "prefill" else 1)
    if task.shape == "decode":
        return {"batch": task.rows, "seq": 1, "ctx": ctx}
    return {"batch": 1, "seq": task.rows, "ctx": max(ctx, task.rows)}


@dataclass
class LocalRunner:
    """Measures on the local CUDA device; ``kernels`` maps a task key to a kernel of that task
    (``extract.TuningTask.kernel``). Needs torch with CUDA and Triton."""

    kernels: Mapping[str, KernelOp]
    target: str = "sm_90"
    hw: Hopper = H200
    jobs: int = 8
    warmup: int = 3
    repeats: int = 15
    ctx: int = 576
    sustain_ms: float = 0.0  # > 0: timed after that long of back-to-back replays (``event_times``)
    name: str = "local"
    check: bool = True  # compare each candidate's results with the heuristic schedule's first
    device: str = "cuda"  # "cpu": the correctness check in Triton's interpreter (tests)
    lost: str = ""  # why the GPU can no longer be used by this process ("" while it can)
    # ``time.monotonic()`` past which nothing more is built or timed (the tune's time budget):
    # candidates still building then are stopped and left untried, to be tried on resume
    deadline: float | None = None
    _pool: Any = field(default=None, repr=False)
    _reference: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def measure(self, task: AnyTask, schedules: Sequence[Mapping[str, int]]) -> list[MeasureResult]:
        from inferx.compiler.codegen import generate
        from inferx.compiler.database import parse_schedule

        kop = self.kernels.get(task.key)
        if kop is None:
            return [MeasureResult.failed("no kernel of this task to build") for _ in schedules]
        results: list[MeasureResult | None] = [None] * len(schedules)
        sources: dict[int, Any] = {}
        for i, s in enumerate(schedules):
            try:
                sched = parse_schedule(task.template, s)
                sources[i] = generate(kop, f"tune_{task.template}", self.target, sched, grid_dependency=False,
                                      rows=task.rows)
            except Exception as e:  # a failing candidate is timed as infinity, never a crash
                results[i] = MeasureResult.failed(f"codegen: {_one_line(e)}")
        env = bench_env(task, self.ctx)
        for i, err in self._build(sources, env).items():
            if err is None:
                results[i] = MeasureResult.untried(OUT_OF_TIME)
            elif err:
                results[i] = MeasureResult.failed(err)
        toolchain: dict[str, str] | None = None
        for i, ks in sources.items():
            if self.lost:
                results[i] = MeasureResult.untried(self.lost)
                continue
            if results[i] is None and self._out_of_time():
                results[i] = MeasureResult.untried(OUT_OF_TIME)
                continue
            launched = False
            if results[i] is None and self.check:
                try:
                    wrong = self.wrong_results(task, kop, ks, env)
                except Exception as e:
                    wrong, launched = f"launch: {_one_line(e)}", True
                if wrong:
                    results[i] = MeasureResult.failed(wrong)
            if results[i] is None:
                try:
                    toolchain = toolchain or _toolchain()
                    times = self.time_kernel(kop, ks, env)
                    results[i] = MeasureResult(statistics.median(times), tuple(times), "", toolchain, self._note(),
                                               regime=regime_of(self.sustain_ms))
                except Exception as e:
                    results[i], launched = MeasureResult.failed(f"launch: {_one_line(e)}"), True
            if launched and self.device != "cpu":
                self._check_context(task, parse_schedule(task.template, schedules[i]))
        return [r if r is not None else MeasureResult.failed("not measured") for r in results]

    def _check_context(self, task: AnyTask, schedule: object) -> None:
        """After a candidate failed at launch: a fault (an illegal address) leaves the CUDA context
        unusable, and every later launch of this process would fail too. Then ``lost`` says so
        (the tuning loop stops; the candidates not yet tried stay untried, to be tried on resume)."""
        import torch

        try:
            torch.ones(1, device=self.device).add_(1)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - whatever the driver says, the context is gone
            self.lost = f"the GPU context was lost at {task} {schedule} ({_one_line(e)})"

    def wrong_results(self, task: AnyTask, kop: KernelOp, ks: Any, env: Mapping[str, int]) -> str:
        """Why ``ks`` (a candidate schedule's kernel) is not to be trusted, or "": its outputs (and
        the caches it writes in place) on seeded operands against the template's heuristic
        schedule on the same operands, relative L2 error within ``tolerance`` (bf16 and f16
        outputs: 2e-2; fp32: 1e-4). A schedule that computes something else must never be
        recorded as the fastest."""
        key = task.key
        if key not in self._reference:
            self._reference[key] = self.outputs(kop, self._heuristic(task, kop), env)
        ref, got = self._reference[key], self.outputs(kop, ks, env)
        for name, want in ref.items():
            have = got[name]
            tol = 1e-4 if want.dtype.itemsize >= 4 else 2e-2
            a, b = have.double(), want.double()
            err = float((a - b).norm() / max(float(b.norm()), 1e-30))
            if not err <= tol:  # NaN fails too
                return f"wrong results: {name} differs from the heuristic schedule's by {err:.3g} (relative L2 > {tol})"
        return ""

    def _heuristic(self, task: AnyTask, kop: KernelOp) -> Any:
        from inferx.compiler.codegen import generate, heuristic_schedule

        sched = heuristic_schedule(kop, self.target, task.rows)
        return generate(kop, f"ref_{task.template}", self.target, sched, grid_dependency=False, rows=task.rows)

    def outputs(self, kop: KernelOp, ks: Any, env: Mapping[str, int]) -> dict[str, Any]:
        """The kernel's results on operands drawn from a fixed seed: every output and every input
        it writes in place (a KV cache), by name."""
        import torch

        from inferx.runtime.plan import Launch, run
        from inferx.runtime.triton_kernels import grid, load_kernel

        torch.manual_seed(1234)
        (args,) = operand_sets(kop, ks, env, self.hw.l2_bytes, self.device, count=1)
        fn = load_kernel(ks, interpret=self.device == "cpu")
        run([Launch(fn, grid(ks, env), args, dict(ks.constexprs, num_warps=ks.num_warps,
                                                    num_stages=ks.num_stages))])
        if self.device != "cpu":
            torch.cuda.synchronize()
        written = set(ks.aliases.values())
        return {f"{p.kind}{p.index}": a.detach().clone() for p, a in zip(ks.params, args, strict=True)
                if p.kind == "out" or (p.kind == "in" and p.index in written)}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _note(self) -> str:
        after = f"{self.warmup}" + (f" and {self.sustain_ms:g} ms of back-to-back replays (sustained clocks)"
                                    if self.sustain_ms > 0 else "")
        return ("one launch: a CUDA graph of launches over rotated operand copies (L2 never warm), "
                f"{self.repeats} replays after {after}, time per launch")

    def _out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _build(self, sources: Mapping[int, Any], env: Mapping[str, int]) -> dict[int, str | None]:
        """Compiles every source in worker processes; the error text per failed index ("" if it
        built, None if the deadline came first: the workers are then stopped)."""
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures import TimeoutError as FutureTimeout

        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=max(1, self.jobs), mp_context=mp.get_context("spawn"))
        arch = int(self.target.removeprefix("sm_"))
        futures = {i: self._pool.submit(_build_one, json.dumps(ks.to_json()), arch, dict(env), self.hw.smem_per_block)
                   for i, ks in sources.items()}
        out: dict[int, str | None] = {}
        for i, fut in futures.items():
            left = None if self.deadline is None else max(0.0, self.deadline - time.monotonic())
            try:
                out[i] = fut.result(timeout=left)
            except FutureTimeout:
                out[i] = None
            except Exception as e:  # a dead worker fails its candidates, not the run
                out[i] = f"build worker: {_one_line(e)}"
                self.close()
        if any(v is None for v in out.values()):
            self._stop_workers()
        return out

    def _stop_workers(self) -> None:
        """Ends the build workers now, mid-compile (a pool's shutdown would wait for them)."""
        if self._pool is None:
            return
        for proc in list(getattr(self._pool, "_processes", {}).values()):
            proc.terminate()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def time_kernel(self, kop: KernelOp, ks: Any, env: Mapping[str, int]) -> list[float]:
        import torch

        from inferx.runtime.plan import Launch, run
        from inferx.runtime.triton_kernels import grid, load_kernel

        fn = load_kernel(ks, interpret=False)
        sets = operand_sets(kop, ks, env, self.hw.l2_bytes)
        kwargs = dict(ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
        gr = grid(ks, env)
        launches = [Launch(fn, gr, args, kwargs) for args in sets]
        n = launches_per_graph(len(launches))
        cycle = [launches[j % len(launches)] for j in range(n)]
        run(cycle)  # compile (from the warmed cache) and check it launches
        torch.cuda.synchronize()
        return graph_times(lambda: run(cycle), len(cycle), self.warmup, self.repeats, self.sustain_ms)


def operand_sets(kop: KernelOp, ks: Any, env: Mapping[str, int], l2_bytes: int, device: str = "cuda",
                 count: int | None = None) -> list[tuple[Any, ...]]:
    """Argument tuples of ``ks``, each over its own copy of every operand (``rotation_count`` of
    them, or ``count``): weights and activations random, i32 inputs (positions, lengths) in range
    for the context, outputs written in place into the input they alias, scratch zeroed. An i4
    input (int4 codes [..., K]) is bound as an artifact stores it, random bytes of uint8
    [..., K / 2] (two codes a byte), and counts half a byte a code; an f8e4m3 input (FP8 codes,
    an FP8 KV cache) as random E4M3 bytes of magnitude below 2 (no NaN)."""
    import torch

    from inferx.compiler.ir import symbolic as sy
    from inferx.compiler.ir.types import TensorType
    from inferx.runtime.plan import eval_dim

    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
              "i64": torch.int64, "i8": torch.int8}

    def shape(ty: Any) -> list[int]:
        assert isinstance(ty, TensorType)
        return [sy.evaluate(d, env) for d in ty.shape]

    ints = _attention_ints(kop, env, device)

    def make(ty: Any, i: int) -> Any:
        if ty.dtype.value == "i4":
            *lead, k = shape(ty)
            return torch.randint(0, 256, [*lead, (k + 1) // 2], dtype=torch.uint8, device=device)
        if ty.dtype.value == "f8e4m3":
            s = shape(ty)
            sign = torch.randint(0, 2, s, device=device) << 7
            return (torch.randint(0, 0x40, s, device=device) | sign).to(torch.uint8)
        dt = dtypes[ty.dtype.value]
        if i in ints:
            return ints[i](shape(ty), dt)
        if dt in (torch.int32, torch.int64):
            return _positions(shape(ty), env.get("ctx", 1), dt, device)
        if dt == torch.int8:
            return torch.randint(-8, 8, shape(ty), dtype=dt, device=device)
        return (torch.randn(shape(ty), device=device) * 0.02).to(dt)

    def nbytes(ty: Any) -> int:
        n = math.prod(shape(ty))
        return (n + 1) // 2 if ty.dtype.value == "i4" else n if ty.dtype.value == "f8e4m3" else (
            n * dtypes[ty.dtype.value].itemsize)

    set_bytes = sum(nbytes(v.type) for v in kop.operands)
    out = []
    for _ in range(count or rotation_count(max(1, set_bytes), l2_bytes)):
        ins = [make(v.type, i) for i, v in enumerate(kop.operands)]
        for x, ss in _row_sums(kop):  # precomputed norm statistics: those of the x given
            ins[ss] = ins[x].float().square().sum(-1)
        outs = [ins[ks.aliases[i]] if i in ks.aliases else torch.zeros(shape(r.type), device=device,
                                                                        dtype=dtypes[r.type.dtype.value])  # type: ignore[attr-defined]
                for i, r in enumerate(kop.results)]
        scratch = [torch.zeros([eval_dim(d, env) for d in sc.shape], dtype=dtypes[sc.dtype], device=device)
                   for sc in ks.scratch]
        by_kind = {"in": ins, "out": outs, "scratch": scratch}
        out.append(tuple(by_kind[p.kind][p.index] if p.kind in by_kind else int(env[p.symbol]) for p in ks.params))
    return out


def _row_sums(kop: KernelOp) -> list[tuple[int, int]]:
    """(x, sumsq) operand indices of each ``rmsnorm_ss`` on kernel inputs."""
    from inferx.compiler.ir import ops_nn as nn

    return [(op.input.index, op.sumsq.index) for op in kop.body.block.ops
            if isinstance(op, nn.RMSNormSumSquaresOp) and isinstance(op.input, BlockArgument)
            and isinstance(op.sumsq, BlockArgument)]


def _positions(shape: list[int], ctx: int, dtype: Any, device: str) -> Any:
    """Positions for a kernel that is not attention (RoPE, KV-cache writes): a prompt's tokens
    (a last dim over several tokens) at 0, 1, 2, ... so that each writes its own cache slot (one
    shared slot would make the result depend on which program writes last); one token per
    sequence at ctx // 2."""
    import torch

    if shape and shape[-1] > 1:
        row = torch.arange(shape[-1], dtype=dtype, device=device) % max(ctx, 1)
        return row.expand(*shape).contiguous()
    return torch.full(shape, ctx // 2, dtype=dtype, device=device)


def _attention_ints(kop: KernelOp, env: Mapping[str, int], device: str = "cuda") -> dict[int, Any]:
    """For a kernel that starts with attention, makers of its ``positions``, ``kv_lens`` and
    ``block_table`` inputs (by operand index) for a full context: decode sequences hold ``ctx``
    keys with the query at position ctx - 1; a prefill prompt of ``seq`` tokens sits at positions
    0..seq-1 and holds ``seq`` keys; a paged cache's sequences hold blocks scattered over its pool.
    Empty for other kernels."""
    import torch

    from inferx.compiler.ir import ops_nn as nn
    from inferx.compiler.ir.types import TensorType

    op = kop.body.block.first_op
    if not isinstance(op, nn.AttentionOp):  # attention, or attention fused with its projection
        return {}
    seq, ctx = env.get("seq", 1), env.get("ctx", 1)
    decode = seq == 1
    length = ctx if decode else seq

    def positions(shape: list[int], dt: Any) -> Any:
        if decode:
            return torch.full(shape, length - 1, dtype=dt, device=device)
        return torch.arange(shape[-1], dtype=dt, device=device).expand(shape).contiguous()

    def kv_lens(shape: list[int], dt: Any) -> Any:
        return torch.full(shape, length, dtype=dt, device=device)

    def block_table(shape: list[int], dt: Any) -> Any:
        """Each sequence's blocks scattered over the pool, as a pool in use holds them (blocks
        shared round-robin where the pool is smaller than every sequence's blocks)."""
        k_t = op.k.type
        assert isinstance(k_t, TensorType) and isinstance(k_t.shape[0], int)
        n = shape[0] * shape[1]
        order = torch.randperm(k_t.shape[0], generator=torch.Generator().manual_seed(0))
        return order[torch.arange(n) % k_t.shape[0]].reshape(shape).to(device=device, dtype=dt)

    out: dict[int, Any] = {}
    for value, maker in ((op.positions, positions), (op.kv_lens, kv_lens), (op.block_table, block_table)):
        if value is not None and isinstance(value, BlockArgument):
            out[value.index] = maker
    return out


def graph_times(body: Callable[[], None], count: int, warmup: int, repeats: int,
                sustain_ms: float = 0.0) -> list[float]:
    """Milliseconds per launch of ``body`` (which makes ``count`` launches, already run once):
    captured as one CUDA graph (plain calls where capture fails), ``repeats`` replays after
    ``warmup`` (and ``sustain_ms``, see ``event_times``), CUDA events around each replay."""
    return event_times(_capture(body), count, warmup, repeats, sustain_ms)


def event_times(fn: Callable[[], None], count: int, warmup: int, repeats: int,
                sustain_ms: float = 0.0) -> list[float]:
    """Milliseconds per launch of ``fn`` (``count`` launches per call): ``repeats`` calls after
    ``warmup``, CUDA events around each. With ``sustain_ms`` the warm-up goes on, calls back to
    back, until that much wall time has passed: the GPU then runs at the clocks its power cap
    allows under this very kernel (an H200 drops from 1980 to about 1515 MHz within seconds of
    continuous matmuls; docs/performance.md), as in a model's prefill, instead
    of the boost clocks of a short burst after idle."""
    import time

    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if sustain_ms > 0:
        end = time.perf_counter() + sustain_ms / 1e3
        while time.perf_counter() < end:
            for _ in range(4):
                fn()
            torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / count)
    return times


def _capture(body: Callable[[], None]) -> Callable[[], None]:
    """A callable replaying what ``body`` launches as one CUDA graph; ``body`` itself where
    capture fails."""
    import torch

    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
            body()
        torch.cuda.current_stream().wait_stream(stream)
        return graph.replay
    except Exception:  # capture is an optimization of the timing, not a requirement
        torch.cuda.synchronize()
        return body


def _build_one(ks_json: str, arch: int, env: dict[str, int], smem_limit: int) -> str:
    """In a worker: compiles the kernel ahead of time (the driver's own build), refuses one whose
    shared memory exceeds ``smem_limit``, then warms Triton's JIT cache for the launch the parent
    makes. The error text, or "" when it built."""
    from inferx.compiler.build import compile_one

    with _captured_output() as captured:
        try:
            built = compile_one(ks_json, arch)
        except Exception as e:
            return f"compile: {_compile_error(e, captured())}"
    if built["shared"] > smem_limit:
        return f"out of resources: {built['shared']} B of shared memory > {smem_limit} B"
    try:
        _warm_jit(ks_json, env)
    except Exception:  # only a cache warm-up: the parent compiles what is missing
        pass
    return ""


def _warm_jit(ks_json: str, env: Mapping[str, int]) -> None:
    import torch

    from inferx.runtime.kernel_source import KernelSource
    from inferx.runtime.triton_kernels import grid, load_kernel

    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32,
              "i64": torch.int64, "i8": torch.int8, "i4": torch.uint8,  # i4: packed two to a byte
              "f8e4m3": torch.uint8}  # E4M3 bytes
    ks = KernelSource.from_json(json.loads(ks_json))
    fn = load_kernel(ks, interpret=False)
    args = [dtypes[p.dtype] if p.kind != "sym" else int(env[p.symbol]) for p in ks.params]
    fn.warmup(*args, grid=grid(ks, env), **ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)


def _toolchain() -> dict[str, str]:
    from importlib.metadata import version

    import torch

    return {"triton": version("triton"), "torch": torch.__version__, "device": torch.cuda.get_device_name()}


@contextlib.contextmanager
def _captured_output() -> Iterator[Callable[[], str]]:
    """Routes this process's stdout and stderr (file descriptors 1 and 2, where the compiler and
    its tools print a failing kernel's whole assembly and a crash reproducer) into a temporary
    file for the block; yields a reader of what was written. A tuning run's log keeps one line
    per failed candidate instead."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for fd in saved:
            os.dup2(tmp.fileno(), fd)

        def read() -> str:
            sys.stdout.flush()
            sys.stderr.flush()
            tmp.seek(0)
            return tmp.read().decode(errors="replace")

        try:
            yield read
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)


def _compile_error(e: BaseException, stderr: str) -> str:
    """One line for a candidate that failed to compile: the assembler's fatal line when there is
    one (register allocation, shared memory), else the exception's first words."""
    for line in (str(e) + "\n" + stderr).splitlines():
        if "fatal" in line and "aborted" not in line:
            return " ".join(line.split())[:300]
    return _one_line(e)


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return " ".join(text.split())[:300]
