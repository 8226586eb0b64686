"""CUDA sessions: an artifact's cubins launched through the CUDA driver API, decode as graph replays.

``CudaSession`` loads every kernel's cubin (``cuModuleLoadData``), copies the weights to the
device once, and runs the launch plan with ``cuLaunchKernel``; torch is not needed. Shapes come
in buckets (the memory plan's: batch 1, 4, 16, 64, ..., the compiled maximum; sequence 1, 512,
2048, ..., the maximum context): intermediate buffers are allocated once per bucket at the
bucket's size, and every kernel reads the true sizes from its arguments, so one bucket's buffers
serve every shape inside it.

Decode: each step is one replay of a CUDA graph captured on the first step of its batch bucket.
A batch that is not a bucket runs in the next bucket up, its extra rows padded (token 0 at
position 0 writing its own cache row, which no real sequence reads). Per-step values (token ids,
positions, context lengths) are copied into the graph's static input buffers before the replay;
grids and kernel parameters depend only on the bucket (design.md), so the replay is the same
step as plain launches. Prefill runs plain launches at the true batch and length: a prefill
step is milliseconds of GPU work against tens of microseconds of launching, and its lengths vary
too much to capture a graph per length.

``time_step`` and ``time_kernels`` time steps and kernels with CUDA events for benchmarks.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from inferx.runtime.artifact import Artifact
from inferx.runtime.cuda_driver import I32, PTR, CudaError, Driver, Kernel, pack_args
from inferx.runtime.kernel_source import KernelSource, Scratch
from inferx.runtime.manifest import (
    ITEM_BYTES,
    ArgSpec,
    BufferSpec,
    CubinMeta,
    EntryPlan,
    LaunchStep,
    Manifest,
    MemoryPlan,
    check_sizes,
    inputs_of,
    read_kernels,
)
from inferx.runtime.plan import eval_dim, resolve
from inferx.runtime.session import DecoderSession, SessionError, manifest_limits
from inferx.runtime.triton_kernels import grid as grid_of

ITEM = ITEM_BYTES


def bucket_of(n: int, buckets: Sequence[int], what: str) -> int:
    """The smallest bucket that holds ``n``; SessionError past the largest."""
    for b in buckets:
        if n <= b:
            return b
    raise SessionError(f"{what} {n} exceeds the largest compiled bucket {max(buckets)}")


def buckets_of(memory_plan: Mapping[str, MemoryPlan | None], symbol: str, maximum: int) -> list[int]:
    """The bucket bounds of ``symbol`` in the artifact's memory plan (or powers of 4 to ``maximum``)."""
    found = {
        b.dims[symbol] for plan in memory_plan.values() if plan is not None for b in plan.buckets if symbol in b.dims
    }
    if not found:
        found = {b for b in (1, 4, 16, 64, 256) if b < maximum}
    return sorted({b for b in found if b <= maximum} | {maximum})


@dataclass
class _Launch:
    kernel: Kernel
    source: KernelSource
    grid: tuple[int, ...]
    params: Any
    storage: list[Any]
    bytes: int
    flops: int


@dataclass
class _Bound:
    """An entry point bound at one (batch, seq): its launches, inputs and logits buffer."""

    launches: list[_Launch]
    inputs: list[int]  # device addresses of input_ids, positions, kv_lens (bucket-sized)
    logits: int
    logits_dtype: str
    graph: Any = None


class CudaSession(DecoderSession):
    """prefill/decode/generate over an artifact's cubins on one CUDA device."""

    def __init__(
        self,
        artifact: Artifact,
        *,
        max_batch: int | None = None,
        graphs: bool = True,
        pdl: bool | None = None,
        device: int = 0,
        driver: Any = None,
        outputs: str = "numpy",
    ):
        """``driver``: what runs the kernels, a ``Driver`` on ``device`` unless given (tests give
        one that runs the kernels' sources in Triton's interpreter instead of their cubins).
        ``outputs``: "numpy" (fp32 logits on the host) or "torch" (torch tensors on the device in
        the artifact's dtype, copied from the session's buffer without passing through the host)."""
        if outputs not in ("numpy", "torch"):
            raise SessionError(f"outputs={outputs!r}: use 'numpy' or 'torch'")
        self.outputs = outputs
        self.manifest = m = Manifest.from_sections(artifact.manifest, artifact.path)
        check_sizes(m, artifact)
        info, batch, max_context = manifest_limits(m, max_batch)
        super().__init__(info, max_batch=batch, max_context=max_context)
        try:
            self.drv = Driver(device) if driver is None else driver
        except CudaError as e:
            raise SessionError(
                f"device='cuda': no CUDA GPU is usable here ({e}); to run on the CPU, load with "
                f"device='cpu' (this artifact targets {artifact.target})"
            ) from None
        if driver is None and (artifact.target == "cpu" or any(k.cubin is None for k in m.kernels.values())):
            raise SessionError(
                f"{artifact.path}: compiled for {artifact.target}, it holds no cubins; "
                "compile with --target h200 (or h100, sm_90) for a CUDA session"
            )
        cc = self.drv.compute_capability()
        if driver is None and cc[0] * 10 + cc[1] != int(artifact.target.removeprefix("sm_")):
            raise SessionError(
                f"{artifact.path} holds cubins for {artifact.target}; device {device} "
                f"({self.drv.name()}) is sm_{cc[0]}{cc[1]}"
            )
        self.use_graphs = graphs
        # Programmatic dependent launch, only for kernels built to wait for their predecessor; by
        # default as the artifact was compiled (``--pdl``, the default). With kernels that release
        # the next one at their end (as built), decode steps are faster with it than without; had
        # they released it at their start, slower (docs/performance.md).
        wanted = m.launch.pdl if pdl is None else pdl
        self.pdl = wanted and all(meta.kernel.grid_dependency for meta in m.kernels.values())
        self.entries = m.entries
        self.entry_points = frozenset(self.entries)
        # The tuning record each tuned kernel was compiled from: its time in the tuner, beside the
        # kernel's time in the step (``time_kernels``); none for a record borrowed from another
        # row bucket, whose time was measured at other rows. A kernel that serves several row
        # buckets has each bucket's (``by_rows``: the rows each bucket runs up to)
        tuned = m.schedules.tuned
        self.record_ms = {name: t.median_ms for name, t in tuned.items() if t.from_rows is None}
        self.record_by_rows = {name: sorted(t.by_rows.items()) for name, t in tuned.items() if t.by_rows}
        self.batch_buckets = buckets_of(m.memory_plan, "batch", m.limits.max_batch)
        self.seq_buckets = buckets_of(m.memory_plan, "seq", max_context)
        self.kernels: dict[str, tuple[KernelSource, Kernel]] = {}
        sources = read_kernels(artifact, m)  # every source verified before any is loaded
        for name, meta in sorted(m.kernels.items()):
            ks = sources[name]
            # a CPU artifact, on a driver that runs sources (tests), has no cubin: Triton's defaults
            c = meta.cubin or CubinMeta(
                "", shared=0, extra_params=2, global_scratch=0, global_scratch_align=1, launch_warps=ks.num_warps
            )
            cubin = artifact.file_bytes(c.file) if meta.cubin else b""
            k = self.drv.load_kernel(cubin, ks, shared=c.shared, extra_params=c.extra_params)
            k = replace(
                k,
                num_warps=c.launch_warps,  # as compiled
                global_scratch=c.global_scratch,
                global_scratch_align=c.global_scratch_align,
            )
            self.kernels[name] = (ks, k)
        self.weights: dict[str, tuple[int, int]] = {}  # name -> (address, bytes)
        for name, w in m.weights.items():
            arr = artifact.mmap(w.file, np.uint8, artifact.files[w.file].size)  # its size: the schema's check
            ptr = self.drv.alloc(arr.nbytes, f"weight {name}")
            self.drv.upload(ptr, arr)
            self.weights[name] = (ptr, arr.nbytes)
        self._weight_ptrs = {name: ptr for name, (ptr, _) in self.weights.items()}
        self.cache_rows = 0
        self.caches: list[int] = []
        self._buffers: dict[tuple[str, int, int], dict[str, int]] = {}
        self._static: dict[tuple[str, str], int] = {}  # buffers of one size in every bucket, by entry
        self._inputs: dict[tuple[str, int, int], list[int]] = {}
        self._bound: dict[tuple[str, int, int], _Bound] = {}
        self.host_ms: list[float] = []  # host time to issue each decode step

    # the backend ---------------------------------------------------------------------------
    def _reset_cache(self, batch: int) -> None:
        i = self.info
        # a paged cache's pool is the same for any batch: allocated once, as for a batch of 1
        rows = bucket_of(batch, self.batch_buckets, "batch") if i.kv_paging is None else 1
        nbytes = math.prod(i.cache_shape(rows, self.max_context)) * ITEM[i.cache_dtype]
        if rows > self.cache_rows:
            for ptr in self.caches:
                self.drv.free(ptr)
            self.caches = [self.drv.alloc(nbytes, f"KV cache {j}") for j in range(2 * i.num_layers)]
            self.cache_rows = rows
            self._bound = {}  # launches and graphs hold the old cache addresses
        for ptr in self.caches:  # stale rows would only be read past kv_lens, but keep runs reproducible
            self.drv.zero(ptr, nbytes)

    def _row_bytes(self) -> int:
        i = self.info
        return i.num_kv_heads * self.max_context * i.head_dim * ITEM[i.cache_dtype]

    def _block_bytes(self) -> int:
        i = self.info
        assert i.kv_paging is not None
        return i.num_kv_heads * i.kv_paging.block_size * i.head_dim * ITEM[i.cache_dtype]

    def _row_caches(self, row: int) -> list[Any]:
        n = self._row_bytes()
        return [self.drv.download(ptr, np.empty(n, dtype=np.uint8), row * n) for ptr in self.caches]

    def _set_row_caches(self, row: int, saved: list[Any]) -> None:
        n = self._row_bytes()
        self.drv.synchronize()  # the steps before have written the cache
        for ptr, v in zip(self.caches, saved, strict=True):
            if not isinstance(v, np.ndarray) or v.nbytes != n:
                raise SessionError(f"restore_row: a saved row of {n} bytes a cache is what save_row gives")
            self.drv.upload(ptr + row * n, v)

    def _block_caches(self, blocks: list[int]) -> list[Any]:
        n = self._block_bytes()
        out = []
        for ptr in self.caches:
            host = np.empty((len(blocks), n), dtype=np.uint8)
            for j, b in enumerate(blocks):
                self.drv.download(ptr, host[j], b * n)
            out.append(host)
        return out

    def _set_block_caches(self, blocks: list[int], saved: list[Any]) -> None:
        n = self._block_bytes()
        self.drv.synchronize()  # the steps before have written the cache
        for ptr, v in zip(self.caches, saved, strict=True):
            if not isinstance(v, np.ndarray) or v.shape != (len(blocks), n):
                raise SessionError(f"restore_row: saved blocks of {n} bytes each are what save_row gives")
            for j, b in enumerate(blocks):
                self.drv.upload(ptr + b * n, np.ascontiguousarray(v[j]))

    def _step(
        self,
        entry: str,
        input_ids: np.ndarray,
        positions: np.ndarray,
        kv_lens: np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        batch, seq = input_ids.shape
        graph = entry == "decode" and self.use_graphs
        start = time.perf_counter()
        padded = bucket_of(batch, self.batch_buckets, "batch") if graph else batch
        bound = self._bind(entry, padded, seq)
        host = [np.zeros((padded, seq), np.int32), np.zeros((padded, seq), np.int32), np.ones(padded, np.int32)]
        host[0][:batch], host[1][:batch], host[2][:batch] = input_ids, positions, kv_lens
        if self.pages is not None:  # padded rows: no token, no key, no block
            host[1][batch:], host[2][batch:] = -1, 0
            table = np.full((padded, self.pages.paging.blocks_per_seq), -1, np.int32)
            table[:batch] = self.block_table(batch)
            host.append(table)
        for ptr, a in zip(bound.inputs, host, strict=True):
            self.drv.upload_async(ptr, a)
        if graph:
            if bound.graph is None:
                bound.graph = self._capture(bound.launches)
            self.drv.replay(bound.graph)
        else:
            self._launch(bound.launches)
        if entry == "decode":
            self.host_ms.append((time.perf_counter() - start) * 1e3)
        per = 1 if entry == "prefill_last" else seq  # logits rows per sequence
        if self.outputs == "torch":  # synchronizes too
            dev = self.drv.as_torch(bound.logits, padded * per * self.info.vocab_size, bound.logits_dtype)
            if rows is not None:
                return dev.view(padded * per, -1)[list(rows)][:, None].clone()  # type: ignore[no-any-return]
            return dev.view(padded, per, -1)[:batch].clone()  # type: ignore[no-any-return]
        if rows is not None:  # those rows alone cross to the host
            return self._download(bound, [int(r) for r in rows])[:, None]
        logits = self._download(bound, range(padded * per))  # synchronizes: host arrays above are consumed
        return logits.reshape(padded, per, -1)[:batch]

    # binding -------------------------------------------------------------------------------
    def _bind(self, entry: str, batch: int, seq: int, context: int | None = None) -> _Bound:
        key = (entry, batch, seq)
        if key in self._bound and context is None:
            return self._bound[key]
        if self.cache_rows < (batch if self.info.kv_paging is None else 1):  # a paged pool serves any batch
            self._reset_cache(batch)
        plan = self.entries[entry]
        alloc = {
            "batch": bucket_of(batch, self.batch_buckets, "batch"),
            "seq": seq if entry == "decode" else bucket_of(seq, self.seq_buckets, "sequence length"),
            "ctx": self.max_context,
        }
        env = {"batch": batch, "seq": seq, "ctx": self.max_context}
        akey = (entry, alloc["batch"], alloc["seq"])
        buffers = self._buffers.setdefault(akey, {})  # the bucket's, sized for it, kept across binds
        if akey not in self._inputs:
            self._inputs[akey] = [
                self.drv.alloc(_size(a, alloc), f"{entry} input {a.name}") for a in plan.args[:inputs_of(self.info)]
            ]

        returned = {b.name for b in plan.returns if b.kind == "buffer"}

        def buffer(name: str, spec: BufferSpec) -> int:
            if name in returned or not all(d.isdigit() for d in spec.shape):
                return self.drv.alloc(_size(spec, alloc), name)
            # The same size in every bucket (an int4 prompt's dense weight): one buffer for all
            # of the entry's buckets, as their launches never run at once and each writes it
            # before reading it
            if (entry, name) not in self._static:
                self._static[entry, name] = self.drv.alloc(_size(spec, alloc), name)
            return self._static[entry, name]

        def scratch(name: str, sc: Scratch) -> int:
            if name not in buffers:
                nbytes = _size(sc, alloc)
                buffers[name] = self.drv.alloc(nbytes, name)
                self.drv.zero(buffers[name], nbytes)
            return buffers[name]

        resolved, returns = resolve(
            plan,
            self.kernels,
            (alloc["batch"], seq),
            self._inputs[akey] + self.caches,
            self._weight_ptrs,
            buffer,
            scratch,
            buffers,
        )
        launches: list[_Launch] = []
        for r in resolved:
            ks, k = r.source, r.kernel
            if ks.empty:  # a row bucket's launch of no programs
                continue
            kinds = [I32 if p.kind == "sym" else PTR for p in ks.params]
            extra = [0] * k.extra_params
            if k.global_scratch and extra:  # the compiler's per-program scratch (TMA descriptors)
                sname = f"{r.step.kernel}#global_scratch@{r.index}"
                nbytes = k.global_scratch * int(np.prod(grid_of(ks, alloc)))  # the bucket's largest grid
                if sname not in buffers:
                    buffers[sname] = self.drv.alloc(nbytes + k.global_scratch_align, sname)
                extra[0] = -(-buffers[sname] // k.global_scratch_align) * k.global_scratch_align
            params, storage = pack_args(r.values(env) + extra, kinds + [PTR] * k.extra_params)
            moved, flops = self._cost(plan, r.step, ks, env, context if context is not None else self.max_context)
            launches.append(_Launch(k, ks, grid_of(ks, env), params, storage, moved, flops))
        ret = plan.returns[0]
        dtype = plan.buffers[ret.name].dtype if ret.kind == "buffer" else self.info.dtype
        bound = _Bound(launches, self._inputs[akey], returns[0], dtype)
        if context is None:
            self._bound[key] = bound
        return bound

    def _cost(
        self, plan: EntryPlan, step: LaunchStep, ks: KernelSource, env: Mapping[str, int], context: int
    ) -> tuple[int, int]:
        """Bytes a launch must move (weights read once, buffers at the true sizes, the KV cache:
        ``context`` positions read by attention, ``seq`` written elsewhere) and its FLOPs
        (2 per weight element per row for GEMMs and fused MLPs; 4 * q elements * context for
        attention, plus the projection's for the fused attention and o projection)."""
        i = self.info
        kv_row = env["batch"] * i.num_kv_heads * i.head_dim * ITEM[i.cache_dtype]
        # Buffers sized by the context (the KV cache as attention reads it) count at ``context``
        # positions, not at the cache's length
        env = {**env, "ctx": context}
        total, flops = 0, 0
        aliased = set(ks.aliases.values())
        cost = ks.cost
        gathered = bool(cost.get("per_row"))
        for j, b in enumerate(step.inputs):
            if b.kind in ("weight", "buffer") and gathered:  # a row per output row (below)
                continue
            if b.kind == "weight":
                total += self.weights[b.name][1]
            elif b.kind == "buffer":
                total += _size(plan.buffers[b.name], env)
            elif b.index >= inputs_of(self.info):
                total += kv_row * (context if cost.get("kv") == "context" else env["seq"])
            elif j not in aliased:
                total += _size(plan.args[b.index], env)
        for j, b in enumerate(step.outputs):
            if j not in ks.aliases:
                total += _size(plan.buffers[b.name], env) * (2 if gathered else 1)
        rows = env["batch"] * env["seq"]
        first = step.inputs[0] if step.inputs else None
        x = plan.buffers[first.name] if first is not None and first.kind == "buffer" else None
        flops_kind = cost.get("flops", "none")
        if flops_kind in ("largest_weight", "largest_int4_weight", "largest_fp8_weight", "two_largest_weights") \
                and x is not None:
            # x's rows: batch, not batch x seq, in prefill_last's tail (the last tokens alone)
            rows = int(np.prod([eval_dim(d, env) for d in x.shape[:-1]]))
        weights = [self.weights[b.name][1] for b in step.inputs if b.kind == "weight"]
        if flops_kind == "largest_weight" and weights:
            flops = 2 * rows * max(weights) // ITEM[i.dtype]
        elif flops_kind == "largest_int4_weight" and weights:  # packed codes: two weights a byte
            flops = 2 * rows * 2 * max(weights)
        elif flops_kind == "largest_fp8_weight" and weights:  # E4M3 codes: a weight a byte
            flops = 2 * rows * max(weights)
        elif flops_kind == "two_largest_weights":  # its two GEMMs' weights, the largest inputs (not the norm's scale)
            flops = 2 * rows * sum(sorted(weights)[-2:]) // ITEM[i.dtype]
        elif flops_kind == "queries_by_context" and x is not None:
            q = _size(x, env) // ITEM[i.dtype]
            flops = 4 * q * context + (2 * rows * max(weights) // ITEM[i.dtype] if weights else 0)
        return total, flops

    # running -------------------------------------------------------------------------------
    def _launch(self, launches: Sequence[_Launch]) -> None:
        for ln in launches:
            self.drv.launch(ln.kernel, ln.grid, ln.params, pdl=self.pdl)

    def _capture(self, launches: Sequence[_Launch]) -> Any:
        self.drv.synchronize()
        self.drv.begin_capture()
        try:
            self._launch(launches)
        finally:
            graph = self.drv.end_capture()
        return graph

    def _download(self, bound: _Bound, rows: Sequence[int]) -> np.ndarray:
        """Logits rows ``rows`` (flat indices) as fp32 [len(rows), vocab]: one copy for a range
        from row 0, else one per row."""
        vocab, item = self.info.vocab_size, ITEM[bound.logits_dtype]
        host = {"bf16": np.uint16, "f16": np.float16, "f32": np.float32}[bound.logits_dtype]
        raw = np.empty((len(rows), vocab), host)
        if isinstance(rows, range) and rows.start == 0 and rows.step == 1:
            self.drv.download(bound.logits, raw)
        else:
            for j, r in enumerate(rows):
                self.drv.download(bound.logits, raw[j], offset=r * vocab * item)
        if bound.logits_dtype == "bf16":  # widened in one pass (no uint32 temporary to shift)
            return np.left_shift(raw, 16, dtype=np.uint32).view(np.float32)
        return raw.astype(np.float32)

    # timing for benchmarks -----------------------------------------------------------------
    def _timing_inputs(self, bound: _Bound, batch: int, seq: int, context: int) -> None:
        rng = np.random.default_rng(0)
        ids = rng.integers(0, self.info.vocab_size, (batch, seq)).astype(np.int32)
        pos = np.broadcast_to(np.arange(context - seq, context, dtype=np.int32), (batch, seq)).copy()
        kvl = np.full(batch, context, np.int32)
        for ptr, a in zip(bound.inputs, (ids, pos, kvl), strict=True):
            self.drv.upload(ptr, a)

    def _bound_for_timing(self, entry: str, batch: int, seq: int, context: int) -> _Bound:
        for name, v in (("batch", batch), ("seq", seq), ("context", context)):
            if type(v) is not int or v < 1:
                raise SessionError(f"cannot time {entry}: {name} must be a positive integer, got {v!r}")
        if context > self.max_context or (entry == "decode" and seq != 1) or context < seq:
            raise SessionError(
                f"cannot time {entry} at batch {batch}, seq {seq}, context {context} "
                f"(maximum context {self.max_context})"
            )
        if batch not in self.batch_buckets:
            raise SessionError(f"time batch sizes that are buckets: {self.batch_buckets}")
        bound = self._bind(entry, batch, seq, context)
        self._timing_inputs(bound, batch, seq, context)
        return bound

    def _time(self, run: Any, warmup: int, iters: int) -> list[float]:
        for _ in range(warmup):
            run()
        events = [(self.drv.event(), self.drv.event()) for _ in range(iters)]
        for a, b in events:
            self.drv.record(a)
            run()
            self.drv.record(b)
        self.drv.synchronize()
        return [self.drv.elapsed_ms(a, b) for a, b in events]

    def time_step(
        self, entry: str, batch: int, seq: int, context: int, warmup: int = 10, iters: int = 50
    ) -> list[float]:
        """Milliseconds per step over ``iters`` steps after ``warmup``: decode one graph replay
        (seq 1, ``context`` tokens in the cache counting the new one), prefill plain launches
        (``context`` = ``seq``). Inputs are fixed random tokens; the cache holds whatever it holds."""
        bound = self._bound_for_timing(entry, batch, seq, context)
        if entry == "decode":
            g = bound.graph = self._capture(bound.launches)
            return self._time(lambda: self.drv.replay(g), warmup, iters)
        return self._time(lambda: self._launch(bound.launches), warmup, iters)

    def time_kernels(
        self, entry: str, batch: int, seq: int, context: int, warmup: int = 5, iters: int = 20
    ) -> list[dict[str, Any]]:
        """Each kernel of the step timed inside a CUDA graph that issues all of its launches of
        the step (for a layer kernel: once per layer, each with its own weights, so L2 does not
        flatter), in plan order: per kernel its launches, ms per launch, bytes and FLOPs per launch,
        and for a tuned kernel the time its tuning record measured (``record_ms``, else None): the
        record of the row bucket the step runs in, where the kernel serves several."""
        bound = self._bound_for_timing(entry, batch, seq, context)
        rows = []
        for name in dict.fromkeys(ln.kernel.name for ln in bound.launches):
            group = [ln for ln in bound.launches if ln.kernel.name == name]
            g = self._capture(group)
            ms = float(np.median(self._time(lambda g=g: self.drv.replay(g), warmup, iters)))
            rows.append(
                {
                    "kernel": name,
                    "template": group[0].source.template,
                    "launches": len(group),
                    "ms_per_launch": ms / len(group),
                    "bytes_per_launch": group[0].bytes,
                    "flops_per_launch": group[0].flops,
                    "schedule_origin": group[0].source.schedule_origin,
                    "record_ms": self._record_ms(name, batch * seq),
                }
            )
        return rows

    def _record_ms(self, name: str, rows: int) -> float | None:
        """The time of the tuning record ``name`` was compiled from for a step of ``rows`` rows:
        its row bucket's (the first bucket that holds ``rows``) where it serves several."""
        by_rows = self.record_by_rows.get(name)
        if by_rows is None:
            return self.record_ms.get(name)
        return next((ms for bound, ms in by_rows if rows <= bound), None)

    def close(self) -> None:
        self.drv.close()


def _size(spec: BufferSpec | ArgSpec | Scratch, env: Mapping[str, int]) -> int:
    return int(np.prod([eval_dim(d, env) for d in spec.shape])) * ITEM[spec.dtype]
