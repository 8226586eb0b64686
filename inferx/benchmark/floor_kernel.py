"""The streaming kernel behind ``floor.time_chain`` (imported only where something is measured:
Triton is needed there, not to read or print results)."""

import triton
import triton.language as tl

BLOCK = 2048  # bf16 elements per load step (4 KB)


@triton.jit
def read_sum(x, out, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """Program i sums elements [i * CHUNK, (i + 1) * CHUNK) of x (n of them in all) into out[i]."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * CHUNK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, CHUNK, BLOCK):
        offs = base + i + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < n, other=0).to(tl.float32)
    tl.store(out + pid, tl.sum(acc))


@triton.jit
def read_phases(x, out, counter, n, PHASES: tl.constexpr, CHUNK: tl.constexpr, BLOCK: tl.constexpr,  # type: ignore[no-untyped-def]
                SYNC: tl.constexpr, MAX_POLLS: tl.constexpr, AHEAD: tl.constexpr = 0):
    """A persistent grid of G programs reads PHASES regions of x, n elements each, one region after
    another: in each, program i sums chunks i, i + G, i + 2G, ... With SYNC, every program then
    waits at a grid-wide barrier before the next region: it counts its arrival on ``counter``
    (zero at launch) and polls it until all G have arrived. out[i] is program i's sum, or -1 where
    a wait gave up after MAX_POLLS polls (the programs were not all resident at once).

    AHEAD (0 or a power of 2): each program loads its first AHEAD chunks of the next region before
    it waits (as a decode layer's next GEMV could load its weights, which do not depend on the
    step before), and adds them after: how much of a barrier's wait those loads hide."""
    pid = tl.program_id(0)
    g = tl.num_programs(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    gave_up = 0
    if AHEAD > 0:  # offsets of the program's first AHEAD chunks in a region
        ahead = (tl.arange(0, AHEAD)[:, None] * g + pid) * CHUNK + tl.arange(0, CHUNK)[None, :]
        pre = tl.load(x + ahead, mask=ahead < n, other=0)
    for p in tl.static_range(PHASES):
        region = x + p * n.to(tl.int64)
        lo = pid * CHUNK
        if AHEAD > 0:  # the region's first chunks are in registers already
            acc += tl.sum(tl.reshape(pre.to(tl.float32), (AHEAD * CHUNK // BLOCK, BLOCK)), 0)
            lo += AHEAD * g * CHUNK
        for c in range(lo, n, g * CHUNK):
            for i in range(0, CHUNK, BLOCK):
                offs = c + i + tl.arange(0, BLOCK)
                acc += tl.load(region + offs, mask=offs < n, other=0).to(tl.float32)
        if AHEAD > 0 and p + 1 < PHASES:
            pre = tl.load(region + n.to(tl.int64) + ahead, mask=ahead < n, other=0)
        if SYNC:
            tl.debug_barrier()  # the whole program has finished the phase
            tl.atomic_add(counter, 1, sem="release")
            seen = tl.atomic_add(counter, 0, sem="acquire")
            polls = 0
            while (seen < (p + 1) * g) & (polls < MAX_POLLS):
                seen = tl.atomic_add(counter, 0, sem="acquire")
                polls += 1
            gave_up += (seen < (p + 1) * g).to(tl.int32)
            tl.debug_barrier()
    tl.store(out + pid, tl.where(gave_up > 0, -1.0, tl.sum(acc)))
