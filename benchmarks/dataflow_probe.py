"""Whether one persistent launch can stream a whole decode step's weights with the step's
dependencies kept by counters, and the weights flowing through shared memory ahead of the waits.

The same stand-in chain as the other probes (``--layer``: MB each phase of a layer streams, 0 for
the latency-bound stand-in of decode attention; ``--layers`` of them and a final stream for the
lm_head), laid out as one buffer of 16 KB tiles in phase order. A grid of ``--per-sm`` programs per
SM, every one resident, deals the tiles round-robin: program i takes tiles i, i + G, i + 2G, ...
Each tile is the weight operand of a ``tl.dot`` (128 x 64 bf16 against a 64 x 16 activation, as a
batch-1 GEMV with its operands swapped), so Triton's pipeliner moves it through shared memory
``--stages`` tiles ahead of the one being used. Before a program uses its first tile of a phase it
waits until every program with tiles in the phase before has counted its last tile of that phase
done (acquire loads on a global counter, in inline PTX the pipeliner does not look into; with
``--sync one`` thread 0 polls and counts for its program, with ``warps`` every warp does), then
loads a dependent 4 KB (the activation the phase before wrote; ``--act 0``: not). Tiles of the
latency phase add ``--steps`` dependent 8 KB loads after the wait. The loads already in flight
keep going while a program waits: nothing drains at a phase boundary but the compute.
``--l2-ahead N``: each tile also asks L2 for the program's tile N on. ``--load tma``: the tiles come as
bulk copies of a tensor descriptor (one thread of warp 0 issues them) instead of cp.async by every
thread. With ``--sync one``: ``--order relaxed`` drops the release and the acquire (wrong in
general: it measures what the ordering costs), ``--backoff`` ns the poller sleeps between polls,
``--signaler`` the thread that counts. ``--sync ll``: no counters and no fence; each phase's output
is 1024 8-byte words, a value with the step's epoch beside it in one access, and a program's first
tile of a phase reads the phase before's words until each carries the epoch (that read is its
activation).

Timed beside the product's form (one launch a phase on wave grids, PDL releasing at each
kernel's end), one launch of the plain streaming kernel over every tile, and the persistent launch
with no waits (``--sync none``):

    python benchmarks/dataflow_probe.py --per-sm 1,2 --stages 6,12 --sync none,one --act 1,0 --out probe.json
    python benchmarks/dataflow_probe.py --per-sm 2 --stages 6 --sync none,one,ll --load cp,tma --order release,relaxed
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inferx.benchmark.floor import add_chain_args, chain_sizes, replay_times, write_probe  # noqa: E402

BN, BK = 128, 64  # a tile: 128 x 64 bf16, 16 KB
TILE = BN * BK
LAT_TASKS = 128  # tiles (programs' worth) of the latency stand-in
LL_WORDS = 1024  # 8-byte words of a phase's output in the flag-in-data form (--sync ll): 2048 bf16 values
LL_SHARE = 16  # the most words one writer stores: every phase needs LL_WORDS / LL_SHARE = 64 writers
WARPS = 8


def schedule(sizes_mb: list[float], programs: int, warps: int = WARPS) -> dict[str, Any]:
    """The host's tables for ``sizes_mb`` (0: a latency phase of LAT_TASKS tiles) dealt round-robin
    over ``programs``: ``bounds`` (the first tile of each phase, then the total), ``kind`` (1 for a
    latency phase), ``need`` (the count a phase's counter reaches when it is done: one a warp of each
    program that has tiles in it), ``advance`` (the most phases a program's next tile is on from
    its last: the kernel's scan of ``bounds`` unrolls that many steps) and ``info`` (for checking:
    a word a tile, its phase << 3, 4 in a latency phase, 2 on its program's last tile of the phase,
    1 on its program's first tile of a phase after the first, which waits)."""
    if programs < 1 or warps < 1 or not sizes_mb or any(mb < 0 for mb in sizes_mb):
        raise ValueError(f"schedule: sizes >= 0 and programs, warps >= 1; got {sizes_mb}, {programs}, {warps}")
    counts = [max(1, int(mb * 1e6) // (2 * TILE)) if mb > 0 else LAT_TASKS for mb in sizes_mb]
    bounds = [0]
    for c in counts:
        bounds.append(bounds[-1] + c)
    info, phase = [], []
    for p, mb in enumerate(sizes_mb):
        lo, hi = bounds[p], bounds[p + 1]
        kind = 4 if mb == 0 else 0
        info += [p << 3 | kind | (2 if t + programs >= hi else 0) | (1 if p and t - programs < lo else 0)
                 for t in range(lo, hi)]
        phase += [p] * (hi - lo)
    advance = max([phase[t + programs] - phase[t] for t in range(len(phase) - programs)]
                  + [phase[min(programs, len(phase)) - 1]])
    return {"bounds": bounds, "kind": [1 if mb == 0 else 0 for mb in sizes_mb],
            "need": [min(programs, c) * warps for c in counts], "advance": advance, "info": info}


def kernel() -> Any:
    import triton
    import triton.language as tl

    # Waits, every thread of a program executing them alike; each gives 0 (for the loads after it to
    # hang on) and sets *$3 to 1 where its wait gave up (2^20 polls: the programs were not all resident).
    # The start (no wait where $1 <= 0) and the poll: *$2 (acquire, GPU scope) until it reaches $1.
    def start(tag: str) -> str:
        return (" .reg .pred p;\n .reg .s32 n;\n .reg .s32 c;\n .reg .u32 t;\n mov.s32 $0, 0;\n setp.le.s32 p, $1, 0;\n"
                f" @p bra.uni {tag}_DONE_${{:uid}};\n")

    def poll(tag: str, load: str = "ld.acquire.gpu", sleep: bool = False) -> str:
        return (f" mov.s32 n, 0;\n{tag}_LOOP_${{:uid}}:\n {load}.global.s32 c, [$2];\n add.s32 n, n, 1;\n"
                f" setp.lt.s32 p, c, $1;\n setp.lt.and.s32 p, n, 1048576, p;\n"
                + (" @p nanosleep.u32 $4;\n" if sleep else "")
                + f" @p bra {tag}_LOOP_${{:uid}};\n setp.lt.s32 p, c, $1;\n @p st.global.s32 [$3], 1;\n")

    # Every warp polls.
    wait_warps = tl.constexpr(f"""{{
{start("IXW")}{poll("IXW")}IXW_DONE_${{:uid}}:
}}""")
    # Thread 0 alone polls, the others wait for it at named barrier 1 (256 threads: 8 warps); the
    # poll acquires or is relaxed (which orders nothing: a diagnostic of what the order costs), and
    # sleeps $4 ns between polls or not.
    def wait_one(tag: str, load: str, sleep: bool) -> tl.constexpr:
        return tl.constexpr(f"""{{
{start(tag)} mov.u32 t, %tid.x;
 setp.ne.u32 p, t, 0;
 @p bra {tag}_SYNC_${{:uid}};
{poll(tag, load, sleep)}{tag}_SYNC_${{:uid}}:
 bar.sync 1, 256;
{tag}_DONE_${{:uid}}:
}}""")

    wait_one_acquire = wait_one("IXV", "ld.acquire.gpu", False)
    wait_one_relaxed = wait_one("IXQ", "ld.relaxed.gpu", False)
    wait_one_acquire_sleep = wait_one("IXA", "ld.acquire.gpu", True)
    wait_one_relaxed_sleep = wait_one("IXB", "ld.relaxed.gpu", True)
    # Counts done where $1 >= 0: lane 0 of each warp adds one to *$2 (release, GPU scope) ...
    signal_warps = tl.constexpr("""{
 .reg .pred p;
 .reg .u32 t;
 mov.u32 t, %tid.x;
 and.b32 t, t, 31;
 setp.eq.u32 p, t, 0;
 setp.ge.and.s32 p, $1, 0, p;
 @p red.release.gpu.global.add.s32 [$2], 1;
 mov.s32 $0, 0;
}""")
    # ... or, after every warp has reached named barrier 1, thread $3 adds one for the program (release,
    # or relaxed: the diagnostic).
    def signal_one(tag: str, red: str) -> tl.constexpr:
        return tl.constexpr(f"""{{
 .reg .pred p;
 .reg .u32 t;
 mov.s32 $0, 0;
 setp.lt.s32 p, $1, 0;
 @p bra.uni {tag}_DONE_${{:uid}};
 bar.sync 1, 256;
 mov.u32 t, %tid.x;
 setp.eq.u32 p, t, $3;
 @p {red}.gpu.global.add.s32 [$2], 1;
{tag}_DONE_${{:uid}}:
}}""")

    signal_one_release = signal_one("IXS", "red.release")
    signal_one_relaxed = signal_one("IXR", "red.relaxed")
    # The flag-in-data form: no counter and no fence. A phase's output is LL_WORDS 8-byte words, each a
    # 32-bit value and the step's epoch beside it, stored in one single-copy-atomic access (relaxed, GPU
    # scope); a reader loads its words (four a thread, their loads in flight together) until every
    # word carries the epoch $8, so the value it returns is the one written with it. *$12 becomes 1
    # where a read gave up (2^20 tries).
    ll_read = tl.constexpr("""{
 .reg .pred p;
 .reg .b64 w<4>;
 .reg .b32 f<4>;
 .reg .s32 n;
 mov.s32 n, 0;
IXL_LOOP_${:uid}:
 ld.relaxed.gpu.global.b64 w0, [$4];
 ld.relaxed.gpu.global.b64 w1, [$5];
 ld.relaxed.gpu.global.b64 w2, [$6];
 ld.relaxed.gpu.global.b64 w3, [$7];
 add.s32 n, n, 1;
 mov.b64 {$0, f0}, w0;
 mov.b64 {$1, f1}, w1;
 mov.b64 {$2, f2}, w2;
 mov.b64 {$3, f3}, w3;
 setp.ne.s32 p, f0, $8;
 setp.ne.or.s32 p, f1, $8, p;
 setp.ne.or.s32 p, f2, $8, p;
 setp.ne.or.s32 p, f3, $8, p;
 setp.lt.and.s32 p, n, 1048576, p;
 @p bra IXL_LOOP_${:uid};
 setp.ne.s32 p, f0, $8;
 setp.ne.or.s32 p, f1, $8, p;
 setp.ne.or.s32 p, f2, $8, p;
 setp.ne.or.s32 p, f3, $8, p;
 @p st.global.s32 [$12], 1;
}""")
    # A word written where $3: the 64 bits of $2 at $1 in one access.
    ll_write = tl.constexpr("""{
 .reg .pred p;
 setp.ne.s32 p, $3, 0;
 @p st.relaxed.gpu.global.b64 [$1], $2;
 mov.u32 $0, 0;
}""")
    # Thread 0 asks L2 for the 16 KB at $1 where $2 (no registers held, nothing waits on it).
    prefetch_l2 = tl.constexpr("""{
 .reg .pred p;
 .reg .u32 t;
 mov.u32 t, %tid.x;
 setp.eq.u32 p, t, 0;
 setp.ne.and.s32 p, $2, 0, p;
 @p cp.async.bulk.prefetch.L2.global [$1], 16384;
 mov.u32 $0, 0;
}""")

    LLW = tl.constexpr(LL_WORDS)
    LLS = tl.constexpr(LL_SHARE)

    @triton.jit
    def dataflow(x, xd, lat, act, out, bounds, kind, need, done, flag, n_tiles, words, epoch,  # type: ignore[no-untyped-def]
                 BN: tl.constexpr, BK: tl.constexpr, STEPS: tl.constexpr, ADVANCE: tl.constexpr, WAIT: tl.constexpr,
                 ONE: tl.constexpr, ACT: tl.constexpr = True, L2_AHEAD: tl.constexpr = 0, TMA: tl.constexpr = False,
                 RELAXED: tl.constexpr = False, BACKOFF: tl.constexpr = 0, SIGNALER: tl.constexpr = 0,
                 LL: tl.constexpr = False):
        """Program i of G takes tiles i, i + G, ... (module docstring); out[i] is its sum of what
        it read; *flag becomes 1 where a wait gave up. ONE: a program waits and counts as one
        (thread 0, named barrier 1), else every warp does. ACT: the dependent activation load after
        each wait. L2_AHEAD: each tile asks L2 for the program's tile that many on. TMA: the tiles come
        through ``xd``, a tensor descriptor of x as rows of BK (bulk copies, not cp.async). RELAXED: with
        ONE, the count and the poll order nothing (wrong in general: what the release costs). BACKOFF: with
        ONE, the poller sleeps that many ns between polls. SIGNALER: with ONE, the thread that counts (the
        pipeliner's bulk copies are issued from warp 0). LL (with WAIT): no counters; a program's last
        tile of phase p writes its share of the phase's LLW words at words + p * LLW (the writers are
        the min(G, tiles) programs with tiles in p, counted from the one with the phase's first tile;
        word j by writer j mod writers), each with *epoch beside its value, and a program's first tile
        of phase p reads all of phase p - 1's words until each carries *epoch (its activation: no other
        load after the wait); with ONE as well, a relaxed count (thread 0, as above) says when to read
        them. Eight warps."""
        pid = tl.program_id(0)
        g = tl.num_programs(0)
        tile = tl.arange(0, BN)[:, None] * BK + tl.arange(0, BK)[None, :]
        a = tl.full((BK, 16), 1.0, dtype=x.dtype.element_ty)
        acc = tl.zeros((BN, 16), dtype=tl.float32)
        lacc = tl.zeros((4096,), dtype=tl.float32)
        p = 0
        for t in range(pid, n_tiles, g):
            if TMA:
                w = xd.load([t * BN, 0])
            else:
                w = tl.load(x + tl.cast(t, tl.int64) * (BN * BK) + tile)
            if L2_AHEAD > 0:
                on = t + L2_AHEAD * g
                tl.inline_asm_elementwise(prefetch_l2, "=r,l,r", [x + tl.cast(on, tl.int64) * (BN * BK),
                                                                  (on < n_tiles).to(tl.int32)],
                                          dtype=tl.int32, is_pure=False, pack=1)
            was = p
            for _ in tl.static_range(ADVANCE):  # the tile's phase: a few loads of a table L1 holds
                p = tl.where(t >= tl.load(bounds + p + 1), p + 1, p)
            lo = tl.load(bounds + p)
            first = (p != was) & (p > 0)  # the program's first tile of a phase after the first
            dep = pid * 0
            if WAIT and LL:
                if ONE:  # a relaxed count first says when to read: the words alone say what was written
                    wanted = tl.load(need + p - 1, mask=first, other=0)
                    zero = tl.inline_asm_elementwise(
                        wait_one_relaxed, "=r,r,l,l,r", [wanted, done + tl.maximum(p - 1, 0), flag,
                                                         tl.full((), 0, tl.int32)],
                        dtype=tl.int32, is_pure=False, pack=1)
                    dep = tl.multiple_of(zero * 2048, 2048)
                if first:
                    e = tl.load(epoch) + dep
                    j = tl.arange(0, LLW)
                    got = tl.inline_asm_elementwise(
                        ll_read, "=r,=r,=r,=r,l,l,l,l,r,r,r,r,l,l,l,l",
                        [words + (p - 1) * LLW + j, tl.full((LLW,), 0, tl.int32) + e,
                         (flag + j * 0).to(tl.int64)], dtype=tl.int32, is_pure=False, pack=4)
                    dep = tl.multiple_of((tl.sum(got.to(tl.float32), 0) * 0.0).to(tl.int32) * 2048, 2048)
            elif WAIT:
                wanted = tl.load(need + p - 1, mask=first, other=0)
                if ONE:
                    polled = [wanted, done + tl.maximum(p - 1, 0), flag, tl.full((), BACKOFF, tl.int32)]
                    if RELAXED and BACKOFF > 0:
                        zero = tl.inline_asm_elementwise(wait_one_relaxed_sleep, "=r,r,l,l,r", polled, dtype=tl.int32,
                                                         is_pure=False, pack=1)
                    elif RELAXED:
                        zero = tl.inline_asm_elementwise(wait_one_relaxed, "=r,r,l,l,r", polled, dtype=tl.int32,
                                                         is_pure=False, pack=1)
                    elif BACKOFF > 0:
                        zero = tl.inline_asm_elementwise(wait_one_acquire_sleep, "=r,r,l,l,r", polled, dtype=tl.int32,
                                                         is_pure=False, pack=1)
                    else:
                        zero = tl.inline_asm_elementwise(wait_one_acquire, "=r,r,l,l,r", polled, dtype=tl.int32,
                                                         is_pure=False, pack=1)
                else:
                    zero = tl.inline_asm_elementwise(wait_warps, "=r,r,l,l",
                                                     [wanted, done + tl.maximum(p - 1, 0), flag],
                                                     dtype=tl.int32, is_pure=False, pack=1)
                dep = tl.multiple_of(zero * 2048, 2048)
            if first and ACT and not LL:  # the activation the phase before wrote: one dependent load after the wait
                v = tl.load(act + dep + tl.arange(0, 2048)).to(tl.float32)
                dep = tl.multiple_of((tl.sum(v, 0) * 0.0).to(tl.int32) * 2048, 2048)
            acc = tl.dot(w, a, acc + dep.to(tl.float32))
            if tl.load(kind + p) == 1:
                k = t - lo
                for s in tl.static_range(STEPS):
                    v = tl.load(lat + (k * STEPS + s) * 4096 + dep + tl.arange(0, 4096)).to(tl.float32)
                    lacc += v
                    dep = tl.multiple_of((tl.sum(v, 0) * 0.0).to(tl.int32) * 2048, 2048)
            if WAIT and LL:  # the program's last tile of the phase writes its words; dep ties them to the loads above
                hi = tl.load(bounds + p + 1)
                writers = tl.minimum(g, hi - lo)  # the programs with tiles in p, from the one with tile lo
                w = (pid - lo % g + g) % g
                if (t + g >= hi) & (w < writers):
                    j = w + writers * tl.arange(0, LLS)
                    word = (tl.load(epoch).to(tl.int64) << 32) | ((dep + j * 0).to(tl.int64) & 0xFFFFFFFF)
                    tl.inline_asm_elementwise(ll_write, "=r,l,l,r", [words + p * LLW + j, word,
                                                                     (j < LLW).to(tl.int32)],
                                              dtype=tl.int32, is_pure=False, pack=1)
                if ONE:
                    sig = tl.where(t + g >= hi, p, -1)
                    tl.inline_asm_elementwise(signal_one_relaxed, "=r,r,l,r", [sig, done + p + tl.minimum(dep, 0),
                                                                             tl.full((), 0, tl.int32)],
                                              dtype=tl.int32, is_pure=False, pack=1)
            elif WAIT:  # the program's last tile of the phase counts it done; dep ties the count to the loads above
                sig = tl.where(t + g >= tl.load(bounds + p + 1), p, -1)
                if ONE:
                    counted = [sig, done + p + tl.minimum(dep, 0), tl.full((), SIGNALER, tl.int32)]
                    if RELAXED:
                        tl.inline_asm_elementwise(signal_one_relaxed, "=r,r,l,r", counted, dtype=tl.int32,
                                                  is_pure=False, pack=1)
                    else:
                        tl.inline_asm_elementwise(signal_one_release, "=r,r,l,r", counted, dtype=tl.int32,
                                                  is_pure=False, pack=1)
                else:
                    tl.inline_asm_elementwise(signal_warps, "=r,r,l", [sig, done + p + tl.minimum(dep, 0)],
                                              dtype=tl.int32, is_pure=False, pack=1)
        total = tl.sum(tl.sum(acc, 1), 0) / 16 + tl.sum(lacc, 0)
        tl.store(out + pid, total)

    return dataflow


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_chain_args(ap)
    ap.add_argument("--per-sm", default="1,2", help="programs per SM (every one must be resident)")
    ap.add_argument("--stages", default="3,4,6", help="pipeline stages of 16 KB tiles, each tried")
    ap.add_argument("--sync", default="none,warps,one", help="how programs wait and count: none (no waits: the "
                    "bytes alone), warps (every warp polls and counts), one (thread 0 for the program), ll (no "
                    "counters: each phase's output words carry the step's epoch, readers load until they do), "
                    "llc (the same words, read once a relaxed count says they are written)")
    ap.add_argument("--l2-ahead", default="0", help="tiles on that each tile asks L2 for (0: none), each tried")
    ap.add_argument("--act", default="1", help="1: a dependent activation load after each wait; 0: none; each tried")
    ap.add_argument("--load", default="cp", help="how tiles come to shared memory, each tried: cp (cp.async by every "
                    "thread) or tma (bulk copies of a tensor descriptor, one thread issuing)")
    ap.add_argument("--backoff", default="0",
                    help="with --sync one, ns the poller sleeps between polls (0: none), each tried")
    ap.add_argument("--signaler", default="0", help="with --sync one, the thread that counts (0-255), each tried")
    ap.add_argument("--order", default="release", help="with --sync one, each tried: release (the count releases, the "
                    "poll acquires) or relaxed (neither: wrong in general, it says what the ordering costs)")
    args = ap.parse_args()
    try:
        per_sms = [int(k) for k in args.per_sm.split(",")]
        stages = [int(s) for s in args.stages.split(",")]
        aheads = [int(k) for k in args.l2_ahead.split(",")]
        acts = [int(k) for k in args.act.split(",")]
        backoffs = [int(k) for k in args.backoff.split(",")]
        signalers = [int(k) for k in args.signaler.split(",")]
    except ValueError:
        per_sms, stages, aheads, acts, backoffs, signalers = [], [], [], [], [], []
    syncs = args.sync.split(",")
    loads, orders = args.load.split(","), args.order.split(",")
    if (not per_sms or not stages or min(per_sms) < 1 or min(stages) < 1
            or not set(syncs) <= {"none", "warps", "one", "ll", "llc"}
            or not aheads or min(aheads) < 0 or not acts or not set(acts) <= {0, 1}
            or not set(loads) <= {"cp", "tma"} or not set(orders) <= {"release", "relaxed"}
            or not backoffs or min(backoffs) < 0 or not signalers or not 0 <= min(signalers) <= max(signalers) < 256):
        sys.exit(f"dataflow_probe: --per-sm {args.per_sm!r} / --stages {args.stages!r} / --sync {args.sync!r} / "
                 f"--l2-ahead {args.l2_ahead!r} / --act {args.act!r} / --load {args.load!r} / --order {args.order!r} / "
                 f"--backoff {args.backoff!r} / --signaler {args.signaler!r}: positive integers, e.g. 1,2 / 4,6; "
                 "each of none, warps, one, ll, llc; integers >= 0; each 0 or 1; each of cp, tma; each of release, "
                 "relaxed; integers >= 0; integers 0-255")
    import torch
    import triton
    from triton.tools.tensor_descriptor import TensorDescriptor

    if not torch.cuda.is_available():
        sys.exit("dataflow_probe: needs a CUDA GPU")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import pdl_chain_probe

    dataflow = kernel()
    sizes = chain_sizes(args)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cuda = {"device": "cuda"}
    tables = schedule(sizes, sms)  # the phases' bounds do not depend on the grid
    n_tiles = tables["bounds"][-1]
    x = torch.ones(n_tiles * TILE, dtype=torch.bfloat16, **cuda)
    xd = TensorDescriptor.from_tensor(x.view(-1, BK), [BN, BK])
    weight_bytes = x.numel() * 2
    lat = torch.ones((LAT_TASKS * args.steps + 1) * 4096, dtype=torch.bfloat16, **cuda)
    act = torch.zeros(4096, dtype=torch.bfloat16, **cuda)
    bounds = torch.tensor(tables["bounds"], dtype=torch.int32, **cuda)
    kind = torch.tensor(tables["kind"], dtype=torch.int32, **cuda)
    done = torch.zeros(len(sizes), dtype=torch.int32, **cuda)
    flag = torch.zeros(1, dtype=torch.int32, **cuda)
    words = torch.zeros(len(sizes) * LL_WORDS, dtype=torch.int64, **cuda)
    epoch = torch.zeros(1, dtype=torch.int32, **cuda)
    out = torch.empty(max(per_sms) * sms + n_tiles, dtype=torch.float32, **cuda)
    lat_reads = sum(LAT_TASKS for mb in sizes if mb == 0) * args.steps * 4096
    rows: list[dict[str, Any]] = []

    def report(form: str, t: float, **extra: Any) -> None:
        rows.append({"form": form, "s": t, **extra})
        print(f"{form:64s} {t * 1e3:.4f} ms ({weight_bytes / t / 1e12:.2f} TB/s)", flush=True)

    # the product's form: one launch a phase on wave grids, PDL releasing at each kernel's end
    stream, latency = pdl_chain_probe.kernels()
    bufs = [x[tables["bounds"][p] * TILE: tables["bounds"][p + 1] * TILE] for p in range(len(sizes))]

    def waves() -> None:
        for mb, b in zip(sizes, bufs, strict=True):
            if mb > 0:
                stream[(b.numel() // 8192,)](b, out, b.numel() // 8192, CHUNK=8192, REL=1, PRE=0, num_warps=8,
                                             launch_pdl=True)
            else:
                latency[(LAT_TASKS,)](lat, out, STEPS=args.steps, REL=1, num_warps=4, launch_pdl=True)

    waves()
    torch.cuda.synchronize()
    replay_times(waves, 1000, 1)  # a second of work first: the clocks up from idle
    report("waves, PDL released at each kernel's end", statistics.median(replay_times(waves, args.replays, 1)))
    from inferx.benchmark.floor_kernel import BLOCK, read_sum

    def flat() -> None:  # every byte in one launch of the plain streaming kernel: the bytes alone
        read_sum[(n_tiles,)](x, out, x.numel(), CHUNK=TILE, BLOCK=BLOCK, num_warps=8)

    flat()
    report("one wave launch over every tile", statistics.median(replay_times(flat, args.replays, 1)))

    props = torch.cuda.get_device_properties(0)
    smem = getattr(props, "shared_memory_per_multiprocessor", 233472)
    for per_sm in per_sms:
        g = per_sm * sms
        for sync in syncs:
            table = schedule(sizes, g, warps=WARPS if sync == "warps" else 1)
            need = torch.tensor(table["need"], dtype=torch.int32, **cuda)
            for st, ahead, act_on, load, order, backoff, signaler in itertools.product(
                    stages, aheads, acts, loads, orders, backoffs, signalers):
                if sync != "one" and (order, backoff, signaler) != (orders[0], backoffs[0], signalers[0]):
                    continue  # those options are the one-thread form's
                form = (f"one launch, {per_sm}/SM, {st} stages, sync {sync}, L2 {ahead} on, act {act_on}, {load}"
                        + (f", {order}, sleep {backoff} ns, thread {signaler} counts" if sync == "one" else ""))
                fewest = min(g, *(b - a for a, b in itertools.pairwise(table["bounds"])))
                if sync in ("ll", "llc") and fewest * LL_SHARE < LL_WORDS:
                    print(f"{form}: a phase has fewer than {LL_WORDS // LL_SHARE} programs to write its words",
                          flush=True)
                    continue
                launch = dict(BN=BN, BK=BK, STEPS=args.steps, ADVANCE=table["advance"], WAIT=sync != "none",
                              LL=sync in ("ll", "llc"),
                              ONE=sync in ("one", "llc"), ACT=bool(act_on), L2_AHEAD=ahead, TMA=load == "tma",
                              RELAXED=order == "relaxed", BACKOFF=backoff, SIGNALER=signaler, num_warps=WARPS,
                              num_stages=st)
                tiles = xd if load == "tma" else x
                built = dataflow.warmup(x, tiles, lat, act, out, bounds, kind, need, done, flag, n_tiles, words, epoch,
                                        grid=(g,), **launch)
                built._init_handles()
                fits = min(smem // (built.metadata.shared + 1024), 65536 // (built.n_regs * 32 * WARPS))
                if fits < per_sm:
                    print(f"{form}: {per_sm} programs an SM do not fit ({built.metadata.shared} B of shared memory, "
                          f"{built.n_regs} registers a thread: {fits} fit)", flush=True)
                    continue

                def run(g: int = g, need: torch.Tensor = need, launch: dict[str, Any] = launch,
                        tiles: Any = tiles) -> None:
                    done.zero_()
                    if launch["LL"]:
                        epoch.add_(1)
                    dataflow[(g,)](x, tiles, lat, act, out, bounds, kind, need, done, flag, n_tiles, words, epoch,
                                   **launch)

                try:
                    flag.zero_()
                    run()
                    torch.cuda.synchronize()
                    if flag.item():
                        raise RuntimeError("a wait gave up (were the programs all resident?)")
                    want = n_tiles * TILE + lat_reads
                    if abs(out[:g].sum().item() - want) > 1e-3 * want:
                        raise RuntimeError(f"sums {out[:g].sum().item()} against {want}")
                    t = statistics.median(replay_times(run, args.replays, 1))
                    if flag.item():
                        raise RuntimeError("a wait gave up in a replay")
                except Exception as exc:  # noqa: BLE001  (a form that fails is reported, the rest still run)
                    print(f"{form}: {type(exc).__name__}: {exc}", flush=True)
                    continue
                report(form, t, per_sm=per_sm, stages=st, sync=sync, l2_ahead=ahead, act=act_on, load=load, order=order,
                       backoff_ns=backoff, signaler=signaler, regs=built.n_regs, shared=built.metadata.shared)
    report("waves again", statistics.median(replay_times(waves, args.replays, 1)))
    print(f"{len(sizes)} phases, {n_tiles} tiles of 16 KB, {weight_bytes / 1e9:.3f} GB; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    write_probe(args.out, args, weight_bytes, rows)


if __name__ == "__main__":
    main()
