"""What programmatic dependent launch (PDL) saves on a chain of streaming kernels, by grid form.

Stand-in kernels for the Llama-3.2-1B decode step at batch 1 (``--layer``: MB each streaming
kernel reads, 0 for a latency-bound stand-in of decode attention; ``--layers`` of them and a
final stream for the lm_head), over distinct bytes, in one CUDA graph. Forms:

- grid: ``waves`` (one program per 16 KB chunk, many waves, as the compiler's GEMVs) or
  ``K/SM`` (a persistent grid of K programs per SM, each taking every G-th chunk);
- PDL off, or on with each program letting the next kernel launch at its end (``end``), right
  after its own wait (``wait``) or before it (``start``);
- ``pre``: each program loads its first ``pre`` chunks before it waits (weights do not depend on the
  kernel before), so with early release the next kernel's programs sit resident with their
  first bytes in flight while this one ends.

    python benchmarks/pdl_chain_probe.py --per-sm 1,2,4 --out probe.json
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inferx.benchmark.floor import add_chain_args, chain_sizes, replay_times, write_probe  # noqa: E402

CHUNK = 8192  # bf16 elements a chunk (16 KB)
RELEASE = {"off": 0, "end": 1, "wait": 2, "start": 3}


def kernels() -> Any:
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

    from inferx.benchmark.floor_kernel import dependent_loads

    @triton.jit
    def stream(x, out, n_chunks, CHUNK: tl.constexpr, REL: tl.constexpr, PRE: tl.constexpr):  # type: ignore[no-untyped-def]
        """Program i of G sums chunks i, i + G, ... of x into out[i]."""
        pid = tl.program_id(0)
        g = tl.num_programs(0)
        offs = tl.arange(0, CHUNK)
        if REL == 3:
            gdc_launch_dependents()
        if PRE > 0:  # chunks pid, pid + G, ..., PRE of them, loaded before the wait
            ahead = (pid + tl.arange(0, PRE) * g).to(tl.int64)
            first = tl.load(x + ahead[:, None] * CHUNK + offs[None, :], mask=(ahead < n_chunks)[:, None], other=0)
        if REL > 0:
            gdc_wait()
        if REL == 2:
            gdc_launch_dependents()
        acc = tl.zeros((CHUNK,), dtype=tl.float32)
        if PRE > 0:
            acc += tl.sum(first.to(tl.float32), 0)
        start = pid + PRE * g
        chunk = x + start.to(tl.int64) * CHUNK
        for _ in range(start, n_chunks, g):
            acc += tl.load(chunk + offs).to(tl.float32)
            chunk += g * CHUNK
        tl.store(out + pid, tl.sum(acc, 0))
        if REL == 1:
            gdc_launch_dependents()

    @triton.jit
    def latency(x, out, STEPS: tl.constexpr, REL: tl.constexpr):  # type: ignore[no-untyped-def]
        """STEPS dependent 8 KB loads per program (each address waits on the last load's sum): a
        stand-in for split-KV decode attention's round trips."""
        pid = tl.program_id(0)
        if REL == 3:
            gdc_launch_dependents()
        if REL > 0:
            gdc_wait()
        if REL == 2:
            gdc_launch_dependents()
        dependent_loads(x, out, pid, STEPS)
        if REL == 1:
            gdc_launch_dependents()

    return stream, latency


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_chain_args(ap)
    ap.add_argument("--per-sm", default="0,1,2,4", help="programs per SM of the persistent grids (0: waves)")
    ap.add_argument("--release", default="off,end,wait,start", help="PDL forms (off, end, wait, start)")
    ap.add_argument("--pre", default="1", help="chunks loaded before the wait (powers of 2), each tried")
    ap.add_argument("--warps", type=int, default=8, help="warps a streaming program")
    args = ap.parse_args()
    bad = [r for r in args.release.split(",") if r not in RELEASE]
    if bad:
        sys.exit(f"pdl_chain_probe: --release {args.release!r}: each one of {', '.join(RELEASE)}")
    if any(not p.isdigit() or int(p) < 1 or int(p) & (int(p) - 1) for p in args.pre.split(",")):
        sys.exit(f"pdl_chain_probe: --pre {args.pre!r}: each a power of 2 (chunks loaded before a wait)")
    import torch
    import triton

    if not torch.cuda.is_available():
        sys.exit("pdl_chain_probe: needs a CUDA GPU")
    stream, latency = kernels()
    pres = [int(p) for p in args.pre.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    sizes = chain_sizes(args)
    lat_programs = 128
    chunks = [max(1, int(mb * 1e6) // 2 // CHUNK) if mb > 0 else 0 for mb in sizes]
    bufs = [torch.ones(c * CHUNK if c else lat_programs * args.steps * 4096 + 4096, dtype=torch.bfloat16,
                       device="cuda") for c in chunks]
    out = torch.empty(max(chunks) + lat_programs, dtype=torch.float32, device="cuda")
    weight_bytes = 2 * sum(c * CHUNK for c in chunks)

    def programs(c: int, per_sm: int) -> int:
        """The grid over ``c`` chunks: one program each (waves), or ``per_sm`` per SM at most."""
        return c if per_sm == 0 else min(c, per_sm * sms)

    def chain(per_sm: int, rel: int, pre: int) -> None:
        for c, b in zip(chunks, bufs, strict=True):
            if c:
                stream[(programs(c, per_sm),)](b, out, c, CHUNK=CHUNK, REL=rel, PRE=pre, num_warps=args.warps,
                                               launch_pdl=rel > 0)
            else:
                latency[(lat_programs,)](b, out, STEPS=args.steps, REL=rel, num_warps=4, launch_pdl=rel > 0)

    def timed(per_sm: int, rel: int, pre: int) -> float:
        chain(per_sm, rel, pre)
        torch.cuda.synchronize()
        last = chunks[-1]
        got = out[: programs(last, per_sm)].sum().item()
        if abs(got - last * CHUNK) > 1e-3 * last * CHUNK:
            raise RuntimeError(f"per_sm {per_sm}, release {rel}, pre {pre}: the lm_head stand-in's sums are wrong")
        return statistics.median(replay_times(lambda: chain(per_sm, rel, pre), args.replays, 1))

    rows: list[dict[str, Any]] = []
    base = None
    for per_sm in [int(k) for k in args.per_sm.split(",")]:
        for name in args.release.split(","):
            rel = RELEASE[name]
            for pre in ([0] + pres if per_sm and rel else [0]):
                try:
                    t = timed(per_sm, rel, pre)
                except Exception as exc:  # noqa: BLE001  (a form that fails is reported, the rest still run)
                    print(f"grid {per_sm or 'waves'}, release {name}, pre {pre}: {type(exc).__name__}: {exc}",
                          flush=True)
                    continue
                base = t if base is None else base
                rows.append({"per_sm": per_sm, "release": name, "pre": pre, "s": t})
                grid = "waves" if per_sm == 0 else f"{per_sm}/SM"
                print(f"grid {grid:5s} release {name:5s} pre {pre}: {t * 1e3:.4f} ms "
                      f"({weight_bytes / t / 1e12:.2f} TB/s; {(t - base) * 1e6:+7.1f} us, "
                      f"{(t - base) / len(sizes) * 1e6:+5.2f} a launch)", flush=True)
    print(f"{len(sizes)} launches, {weight_bytes / 1e9:.3f} GB; {torch.cuda.get_device_name()}, torch "
          f"{torch.__version__}, triton {triton.__version__}")
    write_probe(args.out, args, weight_bytes, rows)


if __name__ == "__main__":
    main()
