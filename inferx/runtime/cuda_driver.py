"""The few CUDA driver API calls a CUDA session needs, through cuda-python's ``cuda.bindings.driver``.

Every call is checked: a failure raises ``CudaError`` naming the call, the CUDA error and what the
session was doing. Device memory is plain ``int`` addresses; ``Driver.launch`` packs kernel
arguments the way ``cuLaunchKernel`` reads them (an array of pointers to each argument's bytes).
Nothing here needs torch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferx.runtime.kernel_source import KernelSource

# A kernel argument: a device pointer (u64) or a 32-bit integer symbol value.
PTR, I32 = "ptr", "i32"


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message names the call and the error."""


def _bindings() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # cuda-python < 12.6
        except ImportError:
            raise CudaError(
                "CUDA sessions load kernels through the CUDA driver API and need cuda-python "
                "(pip install cuda-python): it is not installed"
            ) from None
    return driver


@dataclass
class Kernel:
    """A loaded cubin's kernel and how to launch it."""

    name: str
    function: Any
    num_warps: int
    shared: int
    extra_params: int  # trailing pointer parameters the compiler appends (scratch space)
    global_scratch: int = 0  # bytes per program behind the first of them (TMA descriptors); 0: NULL
    global_scratch_align: int = 1


def pack_args(values: Sequence[int], kinds: Sequence[str]) -> tuple[Any, list[Any]]:
    """``cuLaunchKernel``'s ``kernelParams``: an array of pointers to each argument's storage.
    Returns the array and the storage it points into (keep both alive while it can be launched,
    which for a captured graph means as long as the graph; the graph copies values at capture)."""
    storage: list[Any] = []
    for v, k in zip(values, kinds, strict=True):
        storage.append(ctypes.c_uint64(v) if k == PTR else ctypes.c_int32(v))
    array = (ctypes.c_void_p * max(1, len(storage)))(*[ctypes.addressof(s) for s in storage])
    return array, storage


class Driver:
    """One device's primary context, one stream, and checked driver calls."""

    def __init__(self, device: int = 0):
        self.cu = _bindings()
        self._check(self.cu.cuInit(0), "cuInit")
        self.device = self._check(self.cu.cuDeviceGet(device), f"cuDeviceGet({device})")
        self.context = self._check(self.cu.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        self._check(self.cu.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = self._check(self.cu.cuStreamCreate(1), "cuStreamCreate")  # 1: non-blocking
        self.modules: list[Any] = []
        self.allocations: list[int] = []

    def _check(self, result: Any, call: str) -> Any:
        err, *rest = result if isinstance(result, tuple) else (result,)
        if int(err) != 0:
            _, name = self.cu.cuGetErrorName(err)
            _, text = self.cu.cuGetErrorString(err)
            raise CudaError(f"{call} failed: {_decode(name)} ({_decode(text)})")
        return rest[0] if len(rest) == 1 else tuple(rest)

    def name(self) -> str:
        raw = self._check(self.cu.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        return _decode(raw).split("\x00")[0]

    def compute_capability(self) -> tuple[int, int]:
        attr = self.cu.CUdevice_attribute
        major = self._check(self.cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                                         self.device), "cuDeviceGetAttribute")
        minor = self._check(self.cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                                         self.device), "cuDeviceGetAttribute")
        return int(major), int(minor)

    # kernels -------------------------------------------------------------------------------
    def load_kernel(self, cubin: bytes, ks: KernelSource, *, shared: int, extra_params: int) -> Kernel:
        name, num_warps = ks.name, ks.num_warps
        module = self._check(self.cu.cuModuleLoadData(cubin), f"cuModuleLoadData (kernel {name})")
        self.modules.append(module)
        fn = self._check(self.cu.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")
        if shared > 48 * 1024:
            attr = self.cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self._check(self.cu.cuFuncSetAttribute(fn, attr, shared), f"cuFuncSetAttribute({name}, shared={shared})")
        return Kernel(name, fn, num_warps, shared, extra_params)

    def launch(self, k: Kernel, grid: Sequence[int], params: Any, *, pdl: bool = False) -> None:
        """Launches ``k``. With ``pdl`` (programmatic dependent launch) the kernel may start while
        the previous kernel of the stream drains; it must begin with ``griddepcontrol.wait``
        before touching memory, as every generated GPU kernel does (codegen: grid dependency)."""
        gx, gy, gz = (*grid, 1, 1)[:3]
        what = f"cuLaunchKernel({k.name}, grid={tuple(grid)})"
        if not pdl:
            self._check(self.cu.cuLaunchKernel(k.function, gx, gy, gz, 32 * k.num_warps, 1, 1, k.shared,
                                               self.stream, ctypes.addressof(params), 0), what)
            return
        cfg = self.cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = gx, gy, gz
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32 * k.num_warps, 1, 1
        cfg.sharedMemBytes = k.shared
        cfg.hStream = self.stream
        cfg.attrs = [self._pdl_attr]
        cfg.numAttrs = 1
        self._check(self.cu.cuLaunchKernelEx(cfg, k.function, ctypes.addressof(params), 0), what + " with PDL")

    @property
    def _pdl_attr(self) -> Any:
        if not hasattr(self, "_pdl"):
            attr = self.cu.CUlaunchAttribute()
            attr.id = self.cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            self._pdl = attr
        return self._pdl

    # memory --------------------------------------------------------------------------------
    def alloc(self, nbytes: int, what: str) -> int:
        ptr = int(self._check(self.cu.cuMemAlloc(max(16, nbytes)), f"cuMemAlloc({nbytes} bytes for {what})"))
        self.allocations.append(ptr)
        return ptr

    def free(self, ptr: int) -> None:
        self.allocations.remove(ptr)
        self._check(self.cu.cuMemFree(ptr), "cuMemFree")

    def upload(self, ptr: int, array: np.ndarray) -> None:
        a = np.ascontiguousarray(array)
        if a.nbytes:
            self._check(self.cu.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes), f"cuMemcpyHtoD({a.nbytes} bytes)")

    def upload_async(self, ptr: int, array: np.ndarray) -> None:
        """Stream-ordered copy; ``array`` must stay alive and unchanged until the stream passes it."""
        self._check(self.cu.cuMemcpyHtoDAsync(ptr, array.ctypes.data, array.nbytes, self.stream),
                    f"cuMemcpyHtoDAsync({array.nbytes} bytes)")

    def download(self, ptr: int, out: np.ndarray, offset: int = 0) -> np.ndarray:
        """Fills ``out`` (contiguous) from ``offset`` bytes into the allocation at ``ptr``."""
        self.synchronize()
        self._check(self.cu.cuMemcpyDtoH(out.ctypes.data, ptr + offset, out.nbytes),
                    f"cuMemcpyDtoH({out.nbytes} bytes)")
        return out

    def as_torch(self, ptr: int, count: int, dtype: str) -> Any:
        """A torch tensor on this device viewing ``count`` elements at ``ptr`` (no copy), through
        ``__cuda_array_interface__``; the session's stream is synchronized first. Needs torch."""
        import torch

        self.synchronize()
        typestr = {"bf16": "<u2", "f16": "<f2", "f32": "<f4"}[dtype]
        view = _DeviceArray({"shape": (count,), "typestr": typestr, "data": (ptr, False), "version": 3,
                             "strides": None})
        t = torch.as_tensor(view, device=torch.device("cuda", int(self.device)))
        return t.view(torch.bfloat16) if dtype == "bf16" else t

    def zero(self, ptr: int, nbytes: int) -> None:
        self._check(self.cu.cuMemsetD8Async(ptr, 0, nbytes, self.stream), f"cuMemsetD8Async({nbytes} bytes)")

    def synchronize(self) -> None:
        self._check(self.cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # graphs and events ---------------------------------------------------------------------
    def begin_capture(self) -> None:
        mode = self.cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        self._check(self.cu.cuStreamBeginCapture(self.stream, mode), "cuStreamBeginCapture")

    def end_capture(self) -> Any:
        graph = self._check(self.cu.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        return self._check(self.cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")

    def replay(self, graph_exec: Any) -> None:
        self._check(self.cu.cuGraphLaunch(graph_exec, self.stream), "cuGraphLaunch")

    def event(self) -> Any:
        return self._check(self.cu.cuEventCreate(0), "cuEventCreate")

    def record(self, event: Any) -> None:
        self._check(self.cu.cuEventRecord(event, self.stream), "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        self._check(self.cu.cuEventSynchronize(end), "cuEventSynchronize")
        return float(self._check(self.cu.cuEventElapsedTime(start, end), "cuEventElapsedTime"))

    def close(self) -> None:
        """Frees what this driver allocated and unloads its modules."""
        try:
            self.synchronize()
        finally:
            for ptr in list(self.allocations):
                self.free(ptr)
            for m in self.modules:
                self.cu.cuModuleUnload(m)
            self.modules = []


class _DeviceArray:
    """Device memory as ``__cuda_array_interface__`` (version 3) for torch and other consumers."""

    def __init__(self, interface: dict[str, Any]):
        self.__cuda_array_interface__ = interface


def _decode(b: Any) -> str:
    return b.decode(errors="replace") if isinstance(b, (bytes, bytearray)) else str(b)
