"""The floor under a chain of kernels: what a plain streaming kernel costs per launch inside a
CUDA graph, beside the bytes it reads. Each launch of ``read_sum`` only reads its buffer (bf16,
16-byte loads) and writes one sum per program; a chain of them over distinct buffers (L2 never
holds the next launch's bytes, as in a decode step where each kernel streams its own weights)
is timed per launch at several sizes and fitted as ``t = launch_s + bytes / read_bytes_per_s``.
``launch_s`` is the fixed cost such a kernel pays (its launch in the graph, the ramp to full
bandwidth, the last wave's tail), so a step of N kernels each as good as a plain streaming one,
reading B bytes, takes ``N * launch_s + B / read_bytes_per_s``: the reference a plan of that many
kernels is measured against. Typical fitted values on Hopper: docs/performance.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Sizes fitted (MB): the Llama-3.2-1B and Llama-3-8B decode GEMMs' weights from 8 MB up. 67.1 MB
# (the 1B gate/up) is left out: read this way it falls well off the fitted line at every program
# size, where the gate/up GEMV itself streams it near the copy rate.
FIT_SIZES_MB = (8.4, 12.6, 33.6, 50.3, 117.4, 234.9)
CHUNK_KB = 16  # bytes each program reads: as the compiler's decode GEMVs of 4 rows x K 2048


@dataclass(frozen=True)
class LaunchFloor:
    """The fitted fixed cost per launch and read rate of plain streaming kernels."""

    launch_s: float
    read_bytes_per_s: float

    def kernel_s(self, nbytes: float) -> float:
        """The floor of one launch that reads ``nbytes``."""
        return self.launch_s + nbytes / self.read_bytes_per_s

    def chain_s(self, launches: int, nbytes: float) -> float:
        """The floor of ``launches`` launches that read ``nbytes`` in all."""
        return launches * self.launch_s + nbytes / self.read_bytes_per_s


def fit(points: Sequence[tuple[float, float]]) -> LaunchFloor:
    """``t = launch_s + bytes / read_bytes_per_s`` over (bytes, seconds), robust to a stray size
    (Theil-Sen: the median of the pairwise slopes, then the median intercept). ValueError with
    fewer than two distinct sizes."""
    slopes = [(t2 - t1) / (b2 - b1) for i, (b1, t1) in enumerate(points) for b2, t2 in points[i + 1:] if b2 != b1]
    if not slopes:
        raise ValueError(f"a fit needs two distinct sizes, got {sorted({b for b, _ in points})}")
    slope = statistics.median(slopes)
    return LaunchFloor(statistics.median(t - slope * b for b, t in points), 1.0 / slope)


def replay_times(run: Callable[[], None], replays: int, per: int) -> list[float]:
    """``run`` captured in one CUDA graph, replayed 3 times, then ``replays`` times timed with CUDA
    events: seconds per replay divided by ``per`` (its launches or phases)."""
    import torch

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / per)
    return times


# The Llama-3.2-1B decode layer at batch 1 as stand-in kernels (MB each reads; 0: a latency-bound
# stand-in for decode attention): qkv, attention, o, gate|up, down. The probes' default chain is 16
# of them and a 525.3 MB stream for the lm_head.
LAYER_1B = "12.6,0,8.4,67.1,33.6"


def time_chain(mb: float, chunk_kb: int = CHUNK_KB, chain: int = 16, replays: int = 20) -> dict[str, Any]:
    """Seconds per launch of ``chain`` launches of ``read_sum`` over ``chain`` buffers of ``mb``
    MB each (0: an empty kernel on 132 programs), captured in one CUDA graph, median of
    ``replays`` replays after 3; RuntimeError if the kernel's sums are wrong."""
    import torch

    from inferx.benchmark.floor_kernel import BLOCK, read_sum

    if chunk_kb <= 0 or chunk_kb % 4:
        raise ValueError(f"chunk_kb must be a positive multiple of 4 (one {BLOCK}-element bf16 block), got {chunk_kb}")
    chunk = chunk_kb * 1024 // 2
    n = int(mb * 1e6) // 2
    programs = -(-n // chunk) if n else 132
    bufs = [torch.ones(max(n, 1), dtype=torch.bfloat16, device="cuda") for _ in range(chain)]
    out = torch.empty(programs, dtype=torch.float32, device="cuda")

    def run() -> None:
        for b in bufs:
            read_sum[(programs,)](b, out, n, CHUNK=chunk if n else 0, BLOCK=BLOCK, num_warps=8)

    run()  # compiles
    torch.cuda.synchronize()
    if n and abs(out.sum().item() - n) > 1e-3 * n:
        raise RuntimeError(f"read_sum summed {out.sum().item()} over {n} ones")
    times = replay_times(run, replays, chain)
    bufs.clear()  # the buffers go before the next size is allocated
    torch.cuda.empty_cache()
    return {"chunk_kb": chunk_kb, "mb": mb, "bytes": 2 * n, "programs": programs,
            "s_per_launch": statistics.median(times)}


def time_phases(mb: float, phases: int, per_sm: int = 1, sync: bool = True, chunk_kb: int = CHUNK_KB,
                replays: int = 20, ahead: int = 0) -> dict[str, Any]:
    """Seconds per phase of one persistent ``read_phases`` launch (``per_sm`` programs per SM)
    over ``phases`` regions of ``mb`` MB each, with a grid-wide barrier after each phase or
    none: set beside ``time_chain``'s seconds per launch over the same bytes, what a barrier
    costs against a kernel boundary. ``ahead``: each program loads its first ``ahead`` chunks of
    the next region before it waits (``read_phases``' AHEAD). One CUDA graph (the arrival counter
    zeroed in it), median of ``replays`` replays after 3; RuntimeError if the sums are wrong or a
    barrier wait gave up."""
    import torch

    from inferx.benchmark.floor_kernel import BLOCK, read_phases

    if chunk_kb <= 0 or chunk_kb % 4 or phases < 1 or per_sm < 1 or mb <= 0 or ahead < 0 or ahead & (ahead - 1):
        raise ValueError(f"time_phases: mb > 0, phases >= 1, per_sm >= 1, chunk_kb a multiple of 4, ahead 0 or a "
                         f"power of 2; got {mb}, {phases}, {per_sm}, {chunk_kb}, {ahead}")
    n = int(mb * 1e6) // 2
    programs = torch.cuda.get_device_properties(0).multi_processor_count * per_sm
    bufs = [torch.ones(phases * n, dtype=torch.bfloat16, device="cuda")]
    out = torch.empty(programs, dtype=torch.float32, device="cuda")
    counter = torch.zeros(1, dtype=torch.int32, device="cuda")

    def run() -> None:
        counter.zero_()
        read_phases[(programs,)](bufs[0], out, counter, n, PHASES=phases, CHUNK=chunk_kb * 512, BLOCK=BLOCK, SYNC=sync,
                                 MAX_POLLS=1 << 22, AHEAD=ahead, num_warps=8)

    run()  # compiles
    torch.cuda.synchronize()
    if bool((out < 0).any()) or abs(out.sum().item() - phases * n) > 1e-3 * phases * n:
        raise RuntimeError(f"read_phases on {programs} programs (AHEAD={ahead}): sums {out.sum().item()} of "
                           f"{phases * n} ones, {int((out < 0).sum())} programs gave up waiting at a barrier "
                           "(were they all resident at once? registers per program limit programs per SM)")
    times = replay_times(run, replays, phases)
    if bool((out < 0).any()):
        raise RuntimeError(f"read_phases on {programs} programs: a barrier wait gave up in a replay")
    bufs.clear()  # the buffer goes before the next size is allocated
    torch.cuda.empty_cache()
    return {"mb": mb, "phases": phases, "programs": programs, "sync": sync, "ahead": ahead, "chunk_kb": chunk_kb,
            "bytes_per_phase": 2 * n, "s_per_phase": statistics.median(times)}


def measure_launch_floor(sizes_mb: Sequence[float] = FIT_SIZES_MB, chunk_kb: int = CHUNK_KB) -> LaunchFloor:
    """The fitted floor on this machine's CUDA device (a few seconds)."""
    rows = [time_chain(mb, chunk_kb) for mb in sizes_mb]
    return fit([(r["bytes"], r["s_per_launch"]) for r in rows])


def launch_cycle_s(launch: Callable[[int], None], copies: int, launches: int, iters: int) -> float:
    """Median seconds per launch of a CUDA graph of ``launches`` calls of ``launch(i % copies)``
    (each copy its own weights, so that together they exceed the L2), after one call of each."""
    import torch

    for i in range(copies):
        launch(i)
    torch.cuda.synchronize()

    def run() -> None:
        for i in range(launches):
            launch(i % copies)

    return statistics.median(replay_times(run, iters, launches))
