"""quantize-kv: the KV caches become FP8 (E4M3) with one static scale per KV head and layer.

    %k0: [batch, h, ctx, d] bf16                      %k0: [batch, h, ctx, d] f8e4m3
    %c = ix.kv_write %k0, %k, %pos              ->    %s = ix.weight {name = "kv.k0.scale"} : [h] f32
    %a = ix.attention %q, %c, %cv ...                 %c = ix.kv_write %k0, %k, %pos, %s
                                                      %a = ix.attention %q, %c, %cv ... k_scale %s v_scale %t

Every function argument that an ``ix.kv_write`` writes (the decoder's ``k{i}`` and ``v{i}``)
changes type to f8e4m3; each write quantizes by its cache's scale, and each attention that reads
the caches takes both scales (``inferx.compiler.ir.fp8``, "KV cache"). The scales are weights
named by ``kv_scale_name`` after the argument, one set shared by every entry point; the program's
store serves them (``inferx.compiler.quant.kv``). An attention that reads one FP8 cache and one
float one cannot be expressed: the pass stops with the attention named.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.types import DType, TensorType

KV_PREFIX = "kv."


def kv_scale_name(cache: str) -> str:
    """The store name of the per-head scales of the cache argument named ``cache``."""
    return f"{KV_PREFIX}{cache}.scale"


class KVQuantError(ValueError):
    """A function whose caches cannot all be FP8."""


def written_caches(block: Block) -> list[BlockArgument]:
    """The arguments some ``ix.kv_write`` writes, in order."""
    return [a for a in block.args if any(isinstance(u.operation, nn.KVWriteOp) and u.index == 0 for u in a.uses)]


@dataclass(frozen=True)
class QuantizeKV(ModulePass):
    name = "quantize-kv"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp):
                _quantize(f)


def _quantize(f: func.FuncOp) -> None:
    block = f.body.block
    scale_of: dict[SSAValue, SSAValue] = {}  # an FP8 cache value: its scales
    for arg in written_caches(block):
        at = arg.type
        assert isinstance(at, TensorType)
        if at.dtype == DType.f8e4m3:
            continue
        name = arg.name_hint or f"cache{arg.index}"
        w = t.WeightOp.make(result_types=[TensorType((at.shape[1],), DType.f32)], name=StringAttr(kv_scale_name(name)))
        if block.first_op is None:
            block.add_op(w)
        else:
            Rewriter.insert_op(w, InsertPoint.before(block.first_op))
        new = block.insert_arg(at.with_dtype(DType.f8e4m3), arg.index)
        new.name_hint = name
        arg.replace_all_uses_with(new)
        block.erase_arg(arg)
        scale_of[new] = w.results[0]
    for o in list(block.ops):
        if isinstance(o, nn.KVWriteOp) and o.cache in scale_of and o.scale is None:
            w = nn.KVWriteOp.make(o.cache, o.new, o.positions, scale_of[o.cache])
            w.results[0].name_hint = o.results[0].name_hint
            scale_of[w.results[0]] = scale_of[o.cache]
            Rewriter.replace_op(o, w)
        elif isinstance(o, nn.AttentionOp) and (o.k in scale_of or o.v in scale_of) and o.k_scale is None:
            if not (o.k in scale_of and o.v in scale_of):
                raise KVQuantError(f"@{f.sym_name.data}: an attention reads an FP8 cache and a float one "
                                   f"({o.k.name_hint or 'k'}, {o.v.name_hint or 'v'})")
            a = nn.AttentionOp.make(o.q, o.k, o.v, o.positions, o.kv_lens, scale_of[o.k], scale_of[o.v],
                                    **dict(o.attributes))  # type: ignore[arg-type]
            a.results[0].name_hint = o.results[0].name_hint
            Rewriter.replace_op(o, a)
    ret = block.last_op
    outs = [v.type for v in ret.operands] if isinstance(ret, func.ReturnOp) else list(f.function_type.outputs)
    f.function_type = FunctionType.from_lists([a.type for a in block.args], outs)
