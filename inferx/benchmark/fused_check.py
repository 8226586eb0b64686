"""The fused decode MLP (``mlp`` template) against torch on the same operands, over repeated
launches on the same scratch: how a schedule's results are checked on the GPU
(``benchmarks/mlp_sweep.py``, the GPU tests). Comparing schedules with each other is not enough:
a faulty finisher can give wrong sums in some launches at the heuristic schedule itself, which
every other schedule would then be compared with.

The reference covers the MLPs the Llama-shaped benchmark models have: RMSNorm whose weight the
compiler folded into W1 (no gamma operand in the kernel), SiLU(gate) * up, the down projection and
the residual add.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.types import DType, TensorType

SEED = 1234


def mlp_reference(kop: KernelOp, named: Mapping[str, Any]) -> Any:
    """y = x + down(h) in fp32, with h = silu(gate(xn)) * up(xn) rounded to its dtype in the kernel
    (bf16 in a bf16 model) and xn = rmsnorm(x) without its weight, from the kernel's operands by
    parameter name (x, W1 and W2 where ``mlp.parts`` finds them). ValueError for MLPs outside that
    form."""
    import torch

    from inferx.compiler.families.common.rows import norm_scale
    from inferx.compiler.families.mlp import codegen as mlp
    from inferx.compiler.ir.ops_base import get_float

    p = mlp.parts(kop)
    if isinstance(p, str):
        raise ValueError(f"not a fused MLP kernel: {p}")
    if p.norm is None or norm_scale(kop, p.norm) is not None:
        raise ValueError("the fused MLP reference covers RMSNorm with its weight folded into W1 only")

    def operand(v: SSAValue) -> Any:
        assert isinstance(v, BlockArgument), f"the fused MLP: {v} is not a kernel input"
        return named[f"in{v.index}"].float()

    x = operand(p.norm.operands[0]).reshape(-1, p.k)
    w1, w2 = operand(p.up.weight), operand(p.down.weight)
    xn = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + get_float(p.norm.attributes, "eps"))
    gate_w, up_w = (w1[0::2], w1[1::2]) if p.gate_rows == "pairs" else (w1[: p.i], w1[p.i :])
    h_t = p.down.input.type
    assert isinstance(h_t, TensorType)
    h_dtype = {DType.bf16: torch.bfloat16, DType.f16: torch.float16, DType.f32: torch.float32}[h_t.dtype]
    h = (torch.nn.functional.silu(xn @ gate_w.T) * (xn @ up_w.T)).to(h_dtype).float()
    return x + h @ w2.T


def mlp_errors(kop: KernelOp, ks: Any, env: Mapping[str, int], launches: int = 6, device: str = "cuda") -> list[float]:
    """Relative L2 error of the output against ``mlp_reference`` after each of ``launches``
    launches of ``ks`` on one operand set (its scratch reused, as a replayed graph reuses it)."""
    import torch

    from inferx.autotune.runner import operand_sets
    from inferx.runtime.plan import Launch, run
    from inferx.runtime.triton_kernels import grid, load_kernel

    torch.manual_seed(SEED)
    (args,) = operand_sets(kop, ks, env, 0, device, count=1)
    named = {f"{q.kind}{q.index}": a for q, a in zip(ks.params, args, strict=True)}
    want = mlp_reference(kop, named)
    launch = Launch(load_kernel(ks, interpret=device == "cpu"), grid(ks, env), args,
                    dict(ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages))
    errors = []
    for _ in range(launches):
        run([launch])
        if device != "cpu":
            torch.cuda.synchronize()
        got = named["out0"].float().reshape(want.shape)
        errors.append(float((got - want).norm() / want.norm()))
    return errors
