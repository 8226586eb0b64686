"""Sessions over a compiled artifact, on the CPU or a CUDA GPU.

``device="cpu"`` runs the artifact's own Triton kernels in Triton's interpreter (fp32/fp16):
the same kernels the GPU runs, so CPU tests check them. ``device="cuda"`` loads the artifact's
prebuilt cubins through the CUDA driver API (``CudaSession``: one CUDA graph per shape bucket);
``backend="triton"`` instead JIT-compiles the same kernel sources with Triton and launches them
through torch (a check of the cubins against Triton's own build).

Nothing here imports the compiler (no xDSL, no frontend): an artifact is self-contained.

Loading runs the artifact's kernels (an artifact is code, like a shared library), and only after
it is verified: the container (every file's sha256), the manifest's schema
(``Manifest.from_sections``) and sizes (``check_sizes``), then every kernel source
(``read_kernels``), before the first source runs or the first weight is copied; the weights and
the KV cache are checked against the host's memory before they are allocated.

A CPU session runs wherever Triton was imported first: imported already, even without
``TRITON_INTERPRET=1`` (as importing transformers can do, in a notebook), its kernels run in the
interpreter all the same (``triton_kernels.interpreting``); not imported yet, the session sets
``TRITON_INTERPRET=1`` before importing it. A CUDA session with ``backend="triton"`` compiles
kernels, which a process whose Triton was imported for the interpreter cannot: it is refused there.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inferx.runtime import expr
from inferx.runtime.artifact import Artifact, load_artifact
from inferx.runtime.kernel_source import KernelSource
from inferx.runtime.manifest import Manifest, check_sizes, read_kernels
from inferx.runtime.plan import Launch, bind, run
from inferx.runtime.session import DecoderSession, SessionError, manifest_limits

# numpy views of the stored weights; bf16 is stored as its 16 raw bits, i4 packed two to a byte,
# f8e4m3 as its bytes (kernels read them as uint8 and convert them themselves)
NP_DTYPE = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "i32": np.int32, "i64": np.int64, "i8": np.int8,
            "i4": np.uint8, "f8e4m3": np.uint8}


def stored_shape(shape: tuple[int, ...], dtype: str) -> tuple[int, ...]:
    """The shape of a weight's stored array: i4 [..., K] is uint8 [..., K / 2] (K is even: the
    manifest's byte count of the file says so)."""
    return (*shape[:-1], (shape[-1] + 1) // 2) if dtype == "i4" and shape else shape


def _triton_mode(interpret: bool) -> None:
    want = "1" if interpret else "0"
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = want
        return
    have = os.environ.get("TRITON_INTERPRET", "0")
    if not interpret and have == "1":
        raise SessionError(
            "CUDA sessions with backend='triton' compile for the GPU, and Triton was already imported with "
            "TRITON_INTERPRET=1: set TRITON_INTERPRET=0 before anything imports triton, or use backend='driver'"
        )


def host_memory() -> int | None:
    """The host's physical memory in bytes, where the system says."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(nbytes: int, what: str, device: str) -> None:
    """SessionError where ``nbytes`` for ``what`` cannot fit in a CPU session's host memory."""
    total = host_memory() if device == "cpu" else None
    if total is not None and nbytes > total:
        raise SessionError(f"{what} take {nbytes / 2**30:.1f} GiB; this host has {total / 2**30:.1f} GiB of memory")


# Programs one launch may run in Triton's interpreter, at the compiled limits: more would run for
# hours (an 8B model at batch 64 and 2048 tokens launches about 4M).
MAX_CPU_PROGRAMS = 1 << 24


def _check_cpu_grids(m: Manifest) -> None:
    """SessionError where a kernel's grid, at the compiled limits, is past ``MAX_CPU_PROGRAMS``
    (the grids are already bounded: ``check_sizes``)."""
    ranges = expr.symbol_ranges(m.limits.max_batch, m.limits.max_seq_len)
    for name, meta in sorted(m.kernels.items()):
        programs = math.prod(expr.parse(g).bounds(ranges)[1] for g in meta.kernel.grid)
        if programs > MAX_CPU_PROGRAMS:
            raise SessionError(
                f"kernel {name} launches up to {programs} programs (grid {list(meta.kernel.grid)} at max_batch "
                f"{m.limits.max_batch}, max_seq_len {m.limits.max_seq_len}); Triton's interpreter runs at most "
                f"{MAX_CPU_PROGRAMS}: compile with a smaller --max-batch or --max-seq-len for a CPU session"
            )


@dataclass
class _Graph:
    """One captured decode step for one batch size, and the static buffers it reads and writes."""

    graph: Any
    launches: list[Launch]  # the graph reads their buffers: they must live as long as it does
    ids: Any
    positions: Any
    kv_lens: Any
    logits: Any
    table: Any  # a paged cache's block table, else None


class ArtifactSession(DecoderSession):
    """prefill/decode/generate over an artifact's launch plan."""

    def __init__(self, artifact: Artifact, *, device: str = "cpu", max_batch: int | None = None, graphs: bool = False):
        self.manifest = m = Manifest.from_sections(artifact.manifest, artifact.path)
        check_sizes(m, artifact)
        info, batch, max_context = manifest_limits(m, max_batch)
        super().__init__(info, max_batch=batch, max_context=max_context)
        if device == "cpu" and info.dtype == "bf16":
            raise SessionError(
                "CPU sessions run fp32/fp16 artifacts (bf16 is wrong in Triton's interpreter); "
                "this one is bf16: compile with --dtype fp32 or fp16"
            )
        for name, w in m.weights.items():
            if w.dtype not in NP_DTYPE:
                raise SessionError(
                    f"{artifact.path}: weight {name!r} is {w.dtype}; sessions hold weights of {', '.join(NP_DTYPE)}"
                )
        self.weight_bytes = sum(artifact.files[w.file].size for w in m.weights.values())
        check_memory(self.weight_bytes, "the weights", device)
        if device == "cpu":
            _check_cpu_grids(m)
        sources = read_kernels(artifact, m)  # every source verified before any runs

        import torch

        _triton_mode(interpret=device == "cpu")
        from inferx.runtime.triton_kernels import load_kernel

        self.torch = torch
        self.device = torch.device(device)
        self.use_graphs = graphs and device == "cuda"
        self.dtypes = {
            "f32": torch.float32,
            "f16": torch.float16,
            "bf16": torch.bfloat16,
            "i32": torch.int32,
            "i64": torch.int64,
            "i8": torch.int8,
            "bool": torch.bool,
            "f8e4m3": torch.uint8,  # E4M3 bytes: kernels read them as uint8 and convert them themselves
        }
        self.entries = m.entries
        self.entry_points = frozenset(self.entries)
        self.kernels: dict[str, tuple[KernelSource, Any]] = {}
        for name, ks in sources.items():
            self.kernels[name] = (ks, load_kernel(ks, interpret=device == "cpu"))
        self.weights: dict[str, Any] = {}
        for name, w in m.weights.items():
            arr = np.array(artifact.mmap(w.file, NP_DTYPE[w.dtype], stored_shape(w.shape, w.dtype)))
            t = (
                torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16)
                if w.dtype == "bf16"
                else torch.from_numpy(arr)
            )
            self.weights[name] = t.to(self.device)
        self.caches: list[Any] = []
        self.graphs: dict[int, _Graph] = {}
        self.host_ms: list[float] = []  # host time to issue each decode step (graph replay or launches)

    def _empty(self, shape: list[int], dtype: str) -> Any:
        self._check_buffer(shape, dtype)
        return self.torch.empty(shape, dtype=self.dtypes[dtype], device=self.device)

    def _zeros(self, shape: list[int], dtype: str) -> Any:
        self._check_buffer(shape, dtype)
        return self.torch.zeros(shape, dtype=self.dtypes[dtype], device=self.device)

    def _check_buffer(self, shape: list[int], dtype: str) -> None:
        nbytes = math.prod(shape) * self.dtypes[dtype].itemsize
        check_memory(self.weight_bytes + nbytes, f"the weights and a buffer {shape} of {dtype}", self.device.type)

    def _reset_cache(self, batch: int) -> None:
        i = self.info
        shape = list(i.cache_shape(batch, self.max_context))
        kv_bytes = 2 * i.num_layers * math.prod(shape) * self.dtypes[i.cache_dtype].itemsize
        what = (f"{batch} sequences of {self.max_context} tokens" if i.kv_paging is None
                else f"{i.kv_paging.blocks} blocks of {i.kv_paging.block_size} positions")
        check_memory(self.weight_bytes + kv_bytes, f"the weights and the KV cache of {what}", self.device.type)
        self.caches = []  # the old caches go before the new are made
        self.caches = [self._zeros(shape, i.cache_dtype) for _ in range(2 * i.num_layers)]
        self.graphs = {}  # graphs capture the cache buffers they were built with

    def _row_caches(self, row: int) -> list[Any]:
        return [c[row].to("cpu", copy=True) for c in self.caches]

    def _set_row_caches(self, row: int, saved: list[Any]) -> None:
        for c, v in zip(self.caches, saved, strict=True):  # in place: captured graphs keep their buffers
            c[row].copy_(v)

    def _block_caches(self, blocks: list[int]) -> list[Any]:
        at = self.torch.as_tensor(blocks, device=self.device)
        return [c[at].to("cpu", copy=True) for c in self.caches]

    def _set_block_caches(self, blocks: list[int], saved: list[Any]) -> None:
        at = self.torch.as_tensor(blocks, device=self.device)
        for c, v in zip(self.caches, saved, strict=True):
            c[at] = v.to(self.device)

    def _bind(self, entry: str, args: list[Any], batch: int, seq: int) -> tuple[list[Launch], list[Any]]:
        env = {"batch": batch, "seq": seq, "ctx": self.max_context}
        return bind(
            self.entries[entry], self.kernels, [*args, *self.caches], self.weights, env, self._empty, self._zeros
        )

    def _table(self, n: int) -> list[np.ndarray]:
        """The block table input of a paged cache's step (none for a contiguous cache)."""
        return [] if self.pages is None else [self.block_table(n)]

    def _inputs(self, *arrays: np.ndarray) -> list[Any]:
        return [self.torch.from_numpy(np.ascontiguousarray(a, dtype=np.int32)).to(self.device) for a in arrays]

    def _step(
        self,
        entry: str,
        input_ids: np.ndarray,
        positions: np.ndarray,
        kv_lens: np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        if entry == "decode" and self.use_graphs:
            return self._decode_graph(input_ids, positions, kv_lens)
        start = time.perf_counter()
        launches, results = self._bind(entry, self._inputs(input_ids, positions, kv_lens, *self._table(len(input_ids))),
                                       *input_ids.shape)
        run(launches)
        if entry == "decode":
            self.host_ms.append((time.perf_counter() - start) * 1e3)
        logits = results[0]
        if rows is not None:  # the rows taken where the logits are, before any copy
            flat = logits.reshape(-1, logits.shape[-1])
            logits = flat[self.torch.as_tensor(rows, device=flat.device)][:, None]
        return logits.float().cpu().numpy()

    def _decode_graph(self, input_ids: np.ndarray, positions: np.ndarray, kv_lens: np.ndarray) -> np.ndarray:
        torch = self.torch
        batch = input_ids.shape[0]
        g = self.graphs.get(batch)
        if g is None:
            ids, pos, kvl, *table = self._inputs(input_ids, positions, kv_lens, *self._table(batch))
            launches, results = self._bind("decode", [ids, pos, kvl, *table], batch, 1)
            # Warm up (compiles the kernels) on a side stream, then redo this step inside the capture:
            # the KV write of the warm-up is rewritten with the same values by the captured launches.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                run(launches)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                run(launches)
            g = self.graphs[batch] = _Graph(graph, launches, ids, pos, kvl, results[0], table[0] if table else None)
        start = time.perf_counter()
        g.ids.copy_(torch.from_numpy(np.ascontiguousarray(input_ids, dtype=np.int32)), non_blocking=False)
        g.positions.copy_(torch.from_numpy(np.ascontiguousarray(positions, dtype=np.int32)))
        g.kv_lens.copy_(torch.from_numpy(np.ascontiguousarray(kv_lens, dtype=np.int32)))
        if g.table is not None:
            g.table.copy_(torch.from_numpy(np.ascontiguousarray(self.block_table(batch), dtype=np.int32)))
        g.graph.replay()
        self.host_ms.append((time.perf_counter() - start) * 1e3)
        return g.logits.float().cpu().numpy()


def load(artifact: str | Path, device: str = "cpu", *, backend: str = "driver", **options: Any) -> DecoderSession:
    """Loads an artifact (directory or .ixa) and returns a Session on ``device`` ("cpu" or "cuda").

    On "cuda" the session launches the artifact's cubins through the CUDA driver API
    (``CudaSession``); ``backend="triton"`` instead JIT-compiles the kernel sources with Triton and
    launches them through torch (a cross-check of the cubin path)."""
    if device not in ("cpu", "cuda"):
        raise SessionError(f"unknown device {device!r}: use 'cpu' or 'cuda'")
    if backend not in ("driver", "triton"):
        raise SessionError(f"unknown backend {backend!r}: use 'driver' or 'triton'")
    art = load_artifact(artifact)
    if device == "cuda" and backend == "driver":
        from inferx.runtime.cuda_session import CudaSession

        return CudaSession(art, **options)
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SessionError(
                "device='cuda' needs an NVIDIA GPU and no CUDA GPU is available here (torch.cuda.is_available() "
                f"is False); to run on the CPU, load with device='cpu' (this artifact targets {art.target})"
            )
    return ArtifactSession(art, device=device, **options)
