"""norm-stats: the row statistics of an RMSNorm from the GEMM (or embedding gather) kernel that
produces its input.

    %h = ix.kernel <GEMM> (...) { ... %y = ix.add %res, %acc; ix.yield %y }
    %o = ix.kernel <GEMM> (%h, %g, %w) { ^bb0(%x, ...): %n = ix.rmsnorm %x, %g; ix.linear %n, ... }
becomes
    %h, %ss = ix.kernel <GEMM> (...) { ...; %s = ix.sum_squares %y; ix.yield %y, %s }
    %o = ix.kernel <GEMM> (%h, %g, %w, %ss) { ^bb0(%x, ..., %s): %n = ix.rmsnorm_ss %x, %g, %s; ... }

A GEMM with a norm prologue otherwise reads its rows of x once more for the statistics, in every
program of a row block, a large share of a prefill GEMM's time (docs/performance.md). The
producer sums the squares of each output tile
and the last program of a row block adds the tiles' sums (the gemm template); the consumer
loads one float per row.

The first layer's norm takes its statistics from the embedding gather, whose programs hold whole
rows, so that layer's GEMM is spared its own pass over x too.

Applies where the consumer is a GEMM (an ix.linear, ix.qlinear or ix.fp8_linear: the gemm,
qgemm or fp8gemm template)
whose body starts with an rmsnorm of one of its inputs, that input is a result of a GEMM or
gather producer with the shape of the producer's linear output or embedding (elementwise
epilogues only), and its rows hold the ``seq`` symbol: prefill.
Decode GEMVs take the statistics from the one pass over x they make anyway. Runs after fuse,
before plan-memory; the kernel count does not change.

In ``prefill_last`` the last layer's GEMM feeds a last-token gather, not the final norm, so no
consumer asks for its statistics; it sums them all the same (a float per row, never read), so that
it is the very kernel ``prefill`` runs there: one build, and the tuning records of one task.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, BlockArgument, OpResult, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.types import TensorType

# The ops whose kernels (a GEMM, an embedding gather) can sum the squares of their output rows.
PRODUCERS: tuple[type[IRDLOperation], ...] = (nn.LinearOp, nn.QLinearOp, nn.Fp8LinearOp, nn.EmbeddingOp)
# The GEMMs whose norm prologue can take its statistics as an input.
GEMMS: tuple[type[IRDLOperation], ...] = (nn.LinearOp, nn.QLinearOp, nn.Fp8LinearOp)


@dataclass(frozen=True)
class NormStats(ModulePass):
    name = "norm-stats"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            while _rewrite_one(func.body.block):
                pass
            for gather in [o for o in func.body.block.ops if isinstance(o, KernelOp)]:
                x = _last_token_input(gather)
                if x is not None:
                    _sum_squares_of(x)


def _rewrite_one(block: Block) -> bool:
    """Rewrites the first consumer/producer pair found; False when none is left."""
    for consumer in [o for o in block.ops if isinstance(o, KernelOp)]:
        found = _match(consumer)
        if found is None:
            continue
        norm, x = found
        sumsq = _sum_squares_of(x)
        arg = consumer.body.block.insert_arg(sumsq.type, len(consumer.body.block.args))
        consumer.operands = [*consumer.operands, sumsq]
        new = nn.RMSNormSumSquaresOp.make(norm.input, norm.weight, arg, eps=norm.attributes["eps"])
        consumer.body.block.insert_op_before(new, norm)
        norm.result.replace_all_uses_with(new.results[0])
        consumer.body.block.erase_op(norm)
        return True
    return False


def _match(consumer: KernelOp) -> tuple[nn.RMSNormOp, OpResult] | None:
    norm = consumer.body.block.first_op
    if not isinstance(norm, nn.RMSNormOp) or not isinstance(norm.input, BlockArgument):
        return None
    if not any(isinstance(o, GEMMS) for o in consumer.body.block.ops):
        return None  # a norm that is not a GEMM's prologue
    x = _summable(consumer.inputs[norm.input.index], PRODUCERS)
    return (norm, x) if x is not None else None


def _last_token_input(kernel: KernelOp) -> OpResult | None:
    """The GEMM result a last-token gather kernel reads, where that GEMM could sum its rows'
    squares (``_summable``); else None."""
    first = kernel.body.block.first_op
    if not isinstance(first, nn.LastTokenOp) or not isinstance(first.input, BlockArgument):
        return None
    return _summable(kernel.inputs[first.input.index], GEMMS)


def _summable(x: SSAValue, producers: tuple[type[IRDLOperation], ...]) -> OpResult | None:
    """``x`` where a kernel computing one of ``producers`` (its anchor) produces it with the shape of its anchor's
    result (elementwise epilogues only) on rows that hold ``seq``; else None."""
    producer = x.owner
    if not isinstance(x, OpResult) or not isinstance(producer, KernelOp):
        return None
    x_t = x.type
    assert isinstance(x_t, TensorType)
    if "seq" not in sy.symbols_of(sy.product(x_t.shape[:-1])):
        return None
    anchor = next((o for o in producer.body.block.ops if isinstance(o, producers)), None)
    anchor_t = anchor.results[0].type if anchor is not None else None
    if not isinstance(anchor_t, TensorType) or tuple(anchor_t.shape) != tuple(x_t.shape):
        return None
    return x


def _yield(kernel: KernelOp) -> YieldOp:
    last = kernel.body.block.last_op
    assert isinstance(last, YieldOp)
    return last


def _sum_squares_of(x: OpResult) -> SSAValue:
    """The producer's result holding ``sum_squares(x)``: made once, shared by every consumer."""
    producer = x.owner
    assert isinstance(producer, KernelOp)
    yield_op = _yield(producer)
    value = yield_op.values[x.index]
    for i, v in enumerate(yield_op.values):
        if isinstance(v, OpResult) and isinstance(v.owner, nn.SumSquaresOp) and v.owner.input == value:
            return producer.results[i]
    ss = nn.SumSquaresOp.make(value)
    producer.body.block.insert_op_before(ss, yield_op)
    new_yield = YieldOp.build(operands=[[*yield_op.values, ss.results[0]]])
    producer.body.block.insert_op_before(new_yield, yield_op)
    producer.body.block.erase_op(yield_op)
    body = producer.detach_region(producer.body)
    rebuilt = KernelOp.build(
        operands=[list(producer.inputs)],
        result_types=[[*(r.type for r in producer.results), ss.results[0].type]],
        attributes=dict(producer.attributes),
        regions=[body],
    )
    block = producer.parent_block()
    assert block is not None
    block.insert_op_before(rebuilt, producer)
    for old, r in zip(producer.results, rebuilt.results, strict=False):
        r.name_hint = old.name_hint
        old.replace_all_uses_with(r)
    rebuilt.results[-1].name_hint = f"{x.name_hint or 'x'}_sumsq"
    block.erase_op(producer)
    return rebuilt.results[-1]
