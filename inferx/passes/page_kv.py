"""page-kv: the KV caches become pools of fixed-size blocks read and written through a block table.

    %k0: [batch, h, ctx, d]                          %k0: [blocks, h, B, d]
                                                     %block_table: [batch, ceil(max_seq_len / B)] i32
    %c = ix.kv_write %k0, %k, %pos             ->    %c = ix.kv_write %k0, %k, %pos block_table %block_table
    %a = ix.attention %q, %c, %cv ...                %a = ix.attention %q, %c, %cv ... block_table %block_table

Every function argument that an ``ix.kv_write`` writes (the decoder's ``k{i}`` and ``v{i}``)
becomes a pool of ``blocks`` blocks of ``block-size`` positions; a new argument ``block_table``
(after ``kv_lens``) says which block holds each sequence's positions ``[j * B, (j + 1) * B)``;
each write and each attention over those caches takes it (``ix.kv_write``, ``ix.attention``).
Which blocks a sequence holds is data, chosen by the runtime step by step: sequences may share
blocks of a common prefix, and a pool may hold fewer blocks than every sequence at its longest.

Runs first, on the imported program (before the cleanup phase: fusion makes the kernels read the
table); an FP8 cache stays FP8 (its scales are kept). ``blocks-per-seq`` is the table's width, the
compiled context over the block size rounded up. A function with no cache is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir.types import DType, TensorType
from inferx.passes.quantize_kv import written_caches

BLOCK_TABLE = "block_table"


class PageKVError(ValueError):
    """Options or a program the pass cannot page."""


@dataclass(frozen=True)
class PageKV(ModulePass):
    name = "page-kv"

    block_size: int = 16
    blocks: int = 1
    blocks_per_seq: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for name in ("block_size", "blocks", "blocks_per_seq"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise PageKVError(f"page-kv: {name.replace('_', '-')} must be a whole number >= 1, got {v!r}")
        for f in op.ops:
            if isinstance(f, func.FuncOp):
                self._page(f)

    def _page(self, f: func.FuncOp) -> None:
        block = f.body.block
        caches = written_caches(block)
        if not caches or any(a.name_hint == BLOCK_TABLE for a in block.args):
            return
        first = caches[0].type
        assert isinstance(first, TensorType)
        batch = first.shape[0]
        table = block.insert_arg(TensorType((batch, self.blocks_per_seq), DType.i32), caches[0].index)
        table.name_hint = BLOCK_TABLE
        paged: set[SSAValue] = set()
        for arg in written_caches(block):
            at = arg.type
            assert isinstance(at, TensorType)
            new = block.insert_arg(at.with_shape((self.blocks, at.shape[1], self.block_size, at.shape[3])), arg.index)
            new.name_hint = arg.name_hint
            arg.replace_all_uses_with(new)
            block.erase_arg(arg)
            paged.add(new)
        for o in list(block.ops):
            if isinstance(o, nn.KVWriteOp) and o.cache in paged:
                w = nn.KVWriteOp.make(o.cache, o.new, o.positions, o.scale, table)
                w.results[0].name_hint = o.results[0].name_hint
                paged.add(w.results[0])
                Rewriter.replace_op(o, w)
            elif isinstance(o, nn.AttentionOp) and (o.k in paged or o.v in paged):
                if not (o.k in paged and o.v in paged):
                    raise PageKVError(f"@{f.sym_name.data}: an attention reads a paged cache and a contiguous one "
                                      f"({o.k.name_hint or 'k'}, {o.v.name_hint or 'v'})")
                a = nn.AttentionOp.make(o.q, o.k, o.v, o.positions, o.kv_lens, o.k_scale, o.v_scale, table,
                                        **dict(o.attributes))  # type: ignore[arg-type]
                a.results[0].name_hint = o.results[0].name_hint
                Rewriter.replace_op(o, a)
        ret = block.last_op
        outs = [v.type for v in ret.operands] if isinstance(ret, func.ReturnOp) else list(f.function_type.outputs)
        f.function_type = FunctionType.from_lists([a.type for a in block.args], outs)
