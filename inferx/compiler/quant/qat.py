"""Quantization-aware training: a torch model's linears made to compute with the weights (and, for
FP8, the activations) the compiled kernels will use, with gradients passed straight through the
rounding, so that fine-tuning learns weights that survive it.

    model = transformers.AutoModelForCausalLM...      # float weights
    qat.prepare(model, "int4-g32")                    # or "fp8", or a precision map's layers
    ... train as usual: loss.backward() reaches every weight ...
    qat.finish(model)                                 # plain linears again, the trained float weights
    inferx.compile(model, quant="int4-g32", ...)      # the artifact computes what the model computed

Numerics (those of ``inferx.compiler.quant.rtn`` and ``inferx.compiler.ir.fp8``, in torch):

- int4 (``int4-g<G>``, ``-sym``): each group of G consecutive K elements of a row by round to
  nearest, asymmetric ``m = min, s = (max - m) / 15`` or symmetric ``s = max|w| / 7.5``, codes
  ``rint`` and clipped to 0..15, the weight used ``q * s + m`` (or ``(q - 8) * s``) in fp32. The
  scales and minimums round to the model's dtype as the compiler stores them (minimum down, scale
  up), so a bf16 model trains against its bf16 grid.
- fp8: the weight per output channel (``max|w| / 448``, E4M3 round to nearest even) and each
  token of the linear's input likewise, as the fp8gemm kernels quantize it.

The forward pass uses ``w + (q(w) - w).detach()`` (and the same of x): the value is the
quantized one, the gradient the identity (the straight-through estimator). The compiled model
matches the prepared one up to the order of fp32 sums: a product of the dequantized weight in
place of the kernel's dequantize-and-multiply (``tests/test_qat.py`` states the tolerances).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from inferx.compiler.ir.fp8 import FP8_MAX
from inferx.compiler.ir.quant import Scheme, parse_scheme
from inferx.compiler.quant import precision as pr

_HOOKS = "_inferx_qat_hooks"


def _round_directed(x: torch.Tensor, dtype: torch.dtype, up: bool) -> torch.Tensor:
    """fp32 ``x`` rounded to ``dtype`` (bf16 or f16), to the value at or above it (``up``) or
    at or below it, as fp32 (``rtn._round``)."""
    if dtype == torch.float32:
        return x
    r = x.to(dtype)
    r32 = r.float()
    wrong = r32 < x if up else r32 > x
    bits = r.view(torch.int16).to(torch.int32)
    grows = (r32 > 0) == up  # away from zero: the magnitude's bits grow by one
    stepped = torch.where(grows, bits + 1, bits - 1)
    stepped = torch.where(r32 == 0, torch.full_like(bits, 1 if up else -32767), stepped)  # +-smallest subnormal
    step32 = stepped.to(torch.int16).view(dtype).float()
    return torch.where(wrong, step32, r32)


def fake_int4(w: torch.Tensor, scheme: Scheme, scale_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The fp32 weight ``w[N, K]`` stands for under ``scheme`` by round to nearest (module
    docstring), without gradient."""
    with torch.no_grad():
        n, k = w.shape
        g = w.detach().float().reshape(n, k // scheme.group, scheme.group)
        if scheme.symmetric:
            s = _round_directed(g.abs().amax(-1) / 7.5, scale_dtype, up=True)[..., None]
            live = s > 0
            q = torch.where(live, (torch.round(g / torch.where(live, s, 1.0)) + 8).clamp(0, 15), 8.0)
            out = (q - 8) * s
        else:
            m = _round_directed(g.amin(-1), scale_dtype, up=False)
            s = _round_directed((g.amax(-1) - m) / 15, scale_dtype, up=True)[..., None]
            m = m[..., None]
            live = s > 0
            q = torch.where(live, torch.round((g - m) / torch.where(live, s, 1.0)).clamp(0, 15), 0.0)
            out = q * s + m
        return out.reshape(n, k)


def fake_fp8_rows(a: torch.Tensor) -> torch.Tensor:
    """Each row of ``a`` (its last axis) scaled by its own ``max|a| / 448``, rounded to E4M3 and
    scaled back, in fp32, without gradient (``ir.fp8.quantize_rows``)."""
    with torch.no_grad():
        a32 = a.detach().float()
        amax = a32.abs().amax(-1, keepdim=True)
        s = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
        return (a32 / s).to(torch.float8_e4m3fn).float() * s


class _FakeWeight(nn.Module):
    """The parametrization of a linear's weight: its quantized value forward, identity backward."""

    def __init__(self, precision: str, scale_dtype: torch.dtype):
        super().__init__()
        self.precision, self.scale_dtype = precision, scale_dtype
        self.scheme = None if precision == pr.FP8 else parse_scheme(precision)

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        q = fake_fp8_rows(w) if self.scheme is None else fake_int4(w, self.scheme, self.scale_dtype)
        return w + (q.to(w.dtype) - w).detach()


def _fake_input(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """An FP8 linear's input, each token quantized (forward), passed straight through (backward)."""
    x = args[0]
    return (x + (fake_fp8_rows(x).to(x.dtype) - x).detach(), *args[1:])


def prepare(model: nn.Module, precision: str | Mapping[str, str], head: bool = False) -> dict[str, str]:
    """Makes ``model``'s linears (``nn.Linear``, named by their weights as the compiler names them:
    ``<module>.weight``) compute quantized, in place: every linear but the LM head under
    ``precision`` (fp8 or an int4 scheme; the head too with ``head``), or each as a precision map's
    layers say (float: left as it is). Returns {weight name: precision} of the linears it
    prepared. PrecisionError for an unknown precision or a map naming no linear of the model."""
    linears = {f"{name}.weight": m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    if isinstance(precision, str):
        p = pr.check_precision(precision, "qat")
        layers = {n: p for n in linears if head or not n.endswith("lm_head.weight")}
    else:
        unknown = [n for n in precision if n not in linears]
        if unknown:
            raise pr.PrecisionError(f"qat: {unknown[0]!r} is not a linear of the model (its linears are named like "
                                    f"{next(iter(linears), 'none')!r})")
        layers = {n: pr.check_precision(p, f"qat: {n}") for n, p in precision.items()}
    done = {}
    for name, p in layers.items():
        if p == pr.FLOAT:
            continue
        lin = linears[name]
        scale_dtype = lin.weight.dtype if lin.weight.dtype in (torch.bfloat16, torch.float16) else torch.float32
        if pr.is_int4(p):
            parse_scheme(p).check(tuple(lin.weight.shape), name)
        parametrize.register_parametrization(lin, "weight", _FakeWeight(p, scale_dtype))
        if p == pr.FP8:
            setattr(lin, _HOOKS, lin.register_forward_pre_hook(_fake_input))
        done[name] = p
    return done


def finish(model: nn.Module) -> nn.Module:
    """``model`` with its linears plain again (in place): the trained float weights kept, the
    parametrizations and input hooks removed; what ``inferx.compile`` then quantizes as the
    prepared model computed."""
    for m in model.modules():
        if isinstance(m, nn.Linear) and parametrize.is_parametrized(m, "weight"):
            parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
        hook = getattr(m, _HOOKS, None)
        if hook is not None:
            hook.remove()
            delattr(m, _HOOKS)
    return model
