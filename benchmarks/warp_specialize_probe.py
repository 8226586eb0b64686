"""Does Triton's warp specialization pay on the H200? A bare persistent GEMM on TMA descriptors
(loads and the store), the Llama-3-8B projections at 4096 rows, on the same tiles with and
without ``tl.range(warp_specialize=True)``, each checked against fp32 torch and timed beside
cuBLAS (``torch.matmul``) in the same process: CUDA graphs of six launches over rotated operand
sets, replayed after warm-up, CUDA events, medians per launch.

The product's kernels are not these: their epilogues add residuals, row sums, RoPE and KV-cache
writes (see ``gemm_vs_cublas.py``). This script answers only whether the specialization itself
is worth a schedule knob.

    python benchmarks/warp_specialize_probe.py compile          # sm_90 cubins, no GPU needed
    python benchmarks/warp_specialize_probe.py time --out r.json  # on the GPU
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import triton
import triton.language as tl


@triton.jit
def persistent_gemm(x_ptr, w_ptr, y_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                    NPROG: tl.constexpr, WS: tl.constexpr, FLAT: tl.constexpr, GROUP: tl.constexpr):
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    wd = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    yd = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NPROG, flatten=FLAT, warp_specialize=WS):
        per_group = GROUP * num_n  # GROUP row tiles across every column, then the next group
        first = (tile // per_group) * GROUP
        size = min(num_m - first, GROUP)
        pid_m = first + (tile % per_group) % size
        pid_n = (tile % per_group) // size
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            acc = tl.dot(xd.load([pid_m * BM, k]), wd.load([pid_n * BN, k]).T, acc)
        yd.store([pid_m * BM, pid_n * BN], acc.to(tl.bfloat16))


SHAPES = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
SMS = 132


def configs() -> list[dict[str, int]]:
    """The best plain tiles of the product's records (8 warps), flattened or not, and the
    specialized ones (4 warps: Triton makes two consumer warpgroups and a producer of them)."""
    out = [dict(BM=bm, BN=bn, BK=64, num_warps=8, num_stages=st, WS=0, FLAT=flat, GROUP=8)
           for bm, bn, st in ((128, 256, 3), (256, 128, 3), (128, 128, 4)) for flat in (0, 1)]
    out += [dict(BM=bm, BN=bn, BK=64, num_warps=4, num_stages=st, WS=1, FLAT=0, GROUP=8)
            for bm, bn in ((128, 128), (128, 256), (256, 128)) for st in (2, 3, 4, 5)]
    return out


def compile_all() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"x_ptr": "*bf16", "w_ptr": "*bf16", "y_ptr": "*bf16", "M": "i32", "N": "i32", "K": "i32",
           **{c: "constexpr" for c in ("BM", "BN", "BK", "NPROG", "WS", "FLAT", "GROUP")}}
    for c in configs():
        cons = {k: v for k, v in c.items() if k not in ("num_warps", "num_stages")} | {"NPROG": SMS}
        try:
            k = triton.compile(ASTSource(fn=persistent_gemm, signature=sig, constexprs=cons),
                               target=GPUTarget("cuda", 90, 64),
                               options={"num_warps": c["num_warps"], "num_stages": c["num_stages"]})
            print(f"ok {c}: shared {k.metadata.shared} B, {k.metadata.num_warps} warps"
                  + (", setmaxnreg" if "setmaxnreg" in k.asm["ptx"] else ""), flush=True)
        except Exception as e:  # reported, the rest still built
            print(f"FAIL {c}: {str(e).splitlines()[-1][:200]}", flush=True)


def _graph_us(fn: Any, sets: int) -> float:
    """Median microseconds per launch of ``fn(i)`` over rotated operand sets, in a CUDA graph."""
    import torch

    for i in range(3):
        fn(i % sets)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(6):
            fn(i % sets)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(15):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / 6)
    return statistics.median(ts)


def time_shape(name: str, m: int, n: int, k: int, sets: int = 3) -> list[dict[str, Any]]:
    import torch

    xs = [torch.randn(m, k, device="cuda").to(torch.bfloat16) * 0.1 for _ in range(sets)]
    ws = [torch.randn(n, k, device="cuda").to(torch.bfloat16) * 0.1 for _ in range(sets)]
    ys = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    ref = xs[0].float() @ ws[0].float().t()
    flops = 2 * m * n * k
    cub = _graph_us(lambda i: torch.matmul(xs[i], ws[i].t(), out=ys[i]), sets)
    print(f"{name} cuBLAS {cub:.1f} us {flops / cub / 1e6:.0f} TFLOP/s", flush=True)
    results: list[dict[str, Any]] = [dict(gemm=name, impl="cublas", us=cub)]
    for c in configs():
        kw = {key: v for key, v in c.items() if key not in ("num_warps", "num_stages")}

        def run(i: int, kw: dict[str, int] = kw, c: dict[str, int] = c) -> None:
            persistent_gemm[(SMS,)](xs[i], ws[i], ys[i], m, n, k, NPROG=SMS, num_warps=c["num_warps"],
                                    num_stages=c["num_stages"], **kw)

        try:
            run(0)
            torch.cuda.synchronize()
            err = ((ys[0].float() - ref).norm() / ref.norm()).item()
            us = _graph_us(run, sets) if err < 1e-2 else float("inf")
        except Exception as e:  # out of shared memory and the like: timed as infinity
            err, us = float("nan"), float("inf")
            print(f"  FAIL {c}: {str(e).splitlines()[-1][:160]}", flush=True)
        print(f"  {c} err {err:.1e} {us:.1f} us {flops / us / 1e6:.0f} TFLOP/s ratio {cub / us:.3f}", flush=True)
        results.append(dict(gemm=name, impl="triton", cfg=c, us=us, err=err))
    return results


def time_all(out: Path, m: int = 4096) -> None:
    import torch

    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    results = [r for name, (n, k) in SHAPES.items() for r in time_shape(name, m, n, k)]
    out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "triton": triton.__version__,
                               "rows": m, "results": results}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("compile", "time"))
    ap.add_argument("--out", type=Path, default=Path("warp_specialize_probe.json"))
    args = ap.parse_args()
    compile_all() if args.what == "compile" else time_all(args.out)


if __name__ == "__main__":
    main()
