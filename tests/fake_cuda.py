"""A stand-in for ``inferx.runtime.cuda_driver.Driver`` that runs each kernel's Triton source in
Triton's interpreter on CPU memory, so ``CudaSession`` (binding, buckets, per-bucket variants,
graph capture and replay, argument packing) is tested without a GPU. Addresses are the data
pointers of CPU tensors; a captured graph is the list of launches with the argument values read
at capture time, as a CUDA graph keeps them."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from inferx.runtime.cuda_driver import Kernel
from inferx.runtime.kernel_source import KernelSource
from inferx.runtime.triton_kernels import load_kernel

TORCH = {"f32": torch.float32, "f16": torch.float16, "i32": torch.int32, "i64": torch.int64,
         "i4": torch.uint8}  # int4 codes: packed two to a byte


class FakeDriver:
    def __init__(self) -> None:
        self.memory: dict[int, torch.Tensor] = {}
        self.downloaded = 0  # bytes copied to the host
        self.sources: dict[str, tuple[KernelSource, Any]] = {}
        self.captured: list[Any] | None = None
        self.launches = 0

    def compute_capability(self) -> tuple[int, int]:
        return 9, 0

    def name(self) -> str:
        return "fake"

    def load_kernel(self, cubin: bytes, ks: KernelSource, *, shared: int, extra_params: int) -> Kernel:
        self.sources[ks.name] = (ks, load_kernel(ks, interpret=True))
        return Kernel(ks.name, ks.name, ks.num_warps, shared, extra_params)

    def launch(self, k: Kernel, grid: Sequence[int], params: Any, *, pdl: bool = False) -> None:
        ks, fn = self.sources[k.name]
        args: list[Any] = []
        for i, p in enumerate(ks.params):
            if p.kind in ("in", "out", "scratch"):
                addr = ctypes.c_uint64.from_address(params[i]).value
                args.append(self.memory[addr].view(TORCH[p.dtype]))
            else:
                args.append(ctypes.c_int32.from_address(params[i]).value)

        def run() -> None:
            self.launches += 1
            fn[tuple(grid)](*args, **ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)

        if self.captured is not None:
            self.captured.append(run)
        else:
            run()

    def alloc(self, nbytes: int, what: str) -> int:
        t = torch.full((max(16, nbytes),), 0xFF, dtype=torch.uint8)  # not zero: kernels must not rely on it
        self.memory[t.data_ptr()] = t
        return t.data_ptr()

    def free(self, ptr: int) -> None:
        del self.memory[ptr]

    def upload(self, ptr: int, array: np.ndarray) -> None:
        """Into the allocation holding ``ptr``, from there (a pointer into it, as on a device)."""
        raw = torch.from_numpy(np.ascontiguousarray(array).view(np.uint8).reshape(-1).copy())
        base = max(b for b in self.memory if b <= ptr)
        assert ptr - base + raw.numel() <= self.memory[base].numel(), "an upload past its allocation"
        self.memory[base][ptr - base: ptr - base + raw.numel()] = raw

    upload_async = upload

    def download(self, ptr: int, out: np.ndarray, offset: int = 0) -> np.ndarray:
        self.downloaded += out.nbytes
        out.view(np.uint8).reshape(-1)[:] = self.memory[ptr][offset: offset + out.nbytes].numpy()
        return out

    def as_torch(self, ptr: int, count: int, dtype: str) -> torch.Tensor:
        t = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
        return self.memory[ptr].view(t)[:count]

    def zero(self, ptr: int, nbytes: int) -> None:
        self.memory[ptr][:nbytes] = 0

    def synchronize(self) -> None:
        pass

    def begin_capture(self) -> None:
        self.captured = []

    def end_capture(self) -> list[Any]:
        graph, self.captured = self.captured, None
        return graph or []

    def replay(self, graph: list[Any]) -> None:
        for run in graph:
            run()

    def event(self) -> None:
        return None

    def record(self, event: Any) -> None:
        pass

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return 0.0

    def close(self) -> None:
        self.memory.clear()
