"""plan-memory: places the buffers that live between kernel launches in one arena per shape bucket.

Expects fused IR (runs after fuse, last in the pipeline): every op that does run-time work sits in
an ``ix.kernel``, in launch order. Guarantees: each ``func.func`` carries ``ix.memory_plan``, a
dictionary attribute that prints and re-parses to the same text (layout below), computed by
``plan_memory``; the ops themselves are unchanged, and planning twice gives the same plan.

What is planned, for each kernel result in launch order:
  * a result that writes a KV cache in place (its value is an ``ix.kv_write`` chain whose cache
    is a function argument, directly or through an earlier such result) is an *alias*: it must be
    written into that argument's buffer, never copied. Those arguments are the func's KV caches;
  * otherwise a result that the func returns is an *output*: the runtime owns it, as it owns every
    argument;
  * every other result is an arena *buffer*: its size is ``numel * bits / 8`` bytes rounded up
    to ``alignment``, a symbolic dim; it is live from the kernel that defines it to the last
    kernel that reads it, both included (a kernel reads its inputs while it writes its outputs).
Weights and what is computed from weights alone stay outside kernels and outside the arena.

A bucket binds every symbol of the func (its signature and its buffer sizes) to one upper bound:
the buckets are the cartesian product of the bounds given per symbol, symbols in name order.
For each bucket, buffers are placed by greedy best fit, largest first (ties by definition order):
each goes into the smallest gap left by already placed buffers whose lifetimes overlap its own,
or above all of them. Two buffers with overlapping lifetimes never overlap in memory; others may
share space. The bucket reports its arena's peak bytes, the bytes without reuse (the sum of the
buffer sizes) and the KV-cache bytes (the cache arguments' sizes at the bucket's dims).

Attribute layout::

    ix.memory_plan = {alignment = 256 : i64,
      buffers = [{id = "k0#0", bytes = #ix.dim<...>, live = array<i64: 0, 1>}, ...],
      kv_aliases = [{id = "k1#1", arg = 3 : i64, arg_name = "k0", bytes = #ix.dim<...>}, ...],
      outputs = [{id = "k11#0", result = 0 : i64}, ...],
      buckets = [{dims = {batch = 1 : i64, ...}, peak = ... : i64, no_reuse = ... : i64,
                  kv = ... : i64, offsets = array<i64: ...>}, ...]}

A result's id is ``<kernel name>#<result index>``; ``live`` is the first and last kernel index
(0-based, kernels only); ``offsets`` holds one byte offset per buffer, in ``buffers`` order.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, BlockArgument, OpResult, SSAValue
from xdsl.passes import ModulePass

from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.ops_kernel import KernelOp, YieldOp
from inferx.compiler.ir.ops_nn import KVWriteOp
from inferx.compiler.ir.symbolic import Dim
from inferx.compiler.ir.textio import IRError
from inferx.compiler.ir.types import DimAttr, TensorType

ATTR = "ix.memory_plan"
DEFAULT_ALIGNMENT = 256


class PlanError(ValueError):
    """The plan cannot be made: a symbol without buckets, a bad bound, a malformed attribute."""


@dataclass(frozen=True)
class Buffer:
    """A kernel result placed in the arena, live over kernels ``first..last`` (both included)."""

    id: str
    bytes: Dim
    first: int
    last: int

    def overlaps(self, other: Buffer) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class KVAlias:
    """A kernel result written in place into function argument ``arg`` (a KV cache)."""

    id: str
    arg: int
    arg_name: str
    bytes: Dim


@dataclass(frozen=True)
class Output:
    """A kernel result returned as function result ``result``; the runtime owns its memory."""

    id: str
    result: int


@dataclass(frozen=True)
class BucketPlan:
    """Offsets of every buffer at one binding of the func's symbols, and what that costs."""

    dims: tuple[tuple[str, int], ...]
    offsets: tuple[int, ...]
    peak: int
    no_reuse: int
    kv: int

    @property
    def env(self) -> dict[str, int]:
        return dict(self.dims)


@dataclass(frozen=True)
class MemoryPlan:
    """The memory plan of one func; ``buckets`` are in the order of the cartesian product."""

    alignment: int
    buffers: tuple[Buffer, ...]
    kv_aliases: tuple[KVAlias, ...]
    outputs: tuple[Output, ...]
    buckets: tuple[BucketPlan, ...]

    def sizes(self, bucket: BucketPlan) -> tuple[int, ...]:
        """The bytes of each buffer at ``bucket``'s dims, in ``buffers`` order."""
        env = bucket.env
        return tuple(sy.evaluate(b.bytes, env) for b in self.buffers)

    # attribute form ---------------------------------------------------------------------------
    def to_attr(self) -> DictionaryAttr:
        def i(v: int) -> IntegerAttr:
            return IntegerAttr(v, i64)

        return DictionaryAttr({
            "alignment": i(self.alignment),
            "buffers": ArrayAttr([
                DictionaryAttr({"id": StringAttr(b.id), "bytes": DimAttr(b.bytes),
                                "live": DenseArrayBase.from_list(i64, [b.first, b.last])})
                for b in self.buffers
            ]),
            "kv_aliases": ArrayAttr([
                DictionaryAttr({"id": StringAttr(a.id), "arg": i(a.arg), "arg_name": StringAttr(a.arg_name),
                                "bytes": DimAttr(a.bytes)})
                for a in self.kv_aliases
            ]),
            "outputs": ArrayAttr([
                DictionaryAttr({"id": StringAttr(o.id), "result": i(o.result)}) for o in self.outputs
            ]),
            "buckets": ArrayAttr([
                DictionaryAttr({
                    "dims": DictionaryAttr({name: i(v) for name, v in b.dims}),
                    "peak": i(b.peak), "no_reuse": i(b.no_reuse), "kv": i(b.kv),
                    "offsets": DenseArrayBase.from_list(i64, list(b.offsets)),
                })
                for b in self.buckets
            ]),
        })

    @staticmethod
    def from_attr(attr: Attribute) -> MemoryPlan:
        """Reads back what ``to_attr`` wrote; raises ``PlanError`` naming the field at fault."""
        def field(d: Attribute, key: str, kind: type[Attribute], where: str) -> Attribute:
            if not isinstance(d, DictionaryAttr) or key not in d.data or not isinstance(d.data[key], kind):
                raise PlanError(f"{ATTR}: {where} needs a {kind.__name__} field '{key}'")
            return d.data[key]

        def integer(d: Attribute, key: str, where: str) -> int:
            v = field(d, key, IntegerAttr, where)
            assert isinstance(v, IntegerAttr)
            return v.value.data

        def text(d: Attribute, key: str, where: str) -> str:
            v = field(d, key, StringAttr, where)
            assert isinstance(v, StringAttr)
            return v.data

        def dim(d: Attribute, key: str, where: str) -> Dim:
            v = field(d, key, DimAttr, where)
            assert isinstance(v, DimAttr)
            return v.dim

        def ints(d: Attribute, key: str, where: str) -> tuple[int, ...]:
            v = field(d, key, DenseArrayBase, where)
            assert isinstance(v, DenseArrayBase)
            return tuple(int(x) for x in v.get_values())

        def items(key: str) -> tuple[Attribute, ...]:
            v = field(attr, key, ArrayAttr, "the plan")
            assert isinstance(v, ArrayAttr)
            return tuple(v.data)

        buffers = []
        for n, b in enumerate(items("buffers")):
            live = ints(b, "live", f"buffer {n}")
            if len(live) != 2:
                raise PlanError(f"{ATTR}: buffer {n}: 'live' must hold two kernel indices")
            buffers.append(Buffer(text(b, "id", f"buffer {n}"), dim(b, "bytes", f"buffer {n}"), live[0], live[1]))
        aliases = tuple(
            KVAlias(text(a, "id", f"kv alias {n}"), integer(a, "arg", f"kv alias {n}"),
                    text(a, "arg_name", f"kv alias {n}"), dim(a, "bytes", f"kv alias {n}"))
            for n, a in enumerate(items("kv_aliases"))
        )
        outputs = tuple(
            Output(text(o, "id", f"output {n}"), integer(o, "result", f"output {n}"))
            for n, o in enumerate(items("outputs"))
        )
        buckets = []
        for n, b in enumerate(items("buckets")):
            where = f"bucket {n}"
            dims = field(b, "dims", DictionaryAttr, where)
            assert isinstance(dims, DictionaryAttr)
            offsets = ints(b, "offsets", where)
            if len(offsets) != len(buffers):
                raise PlanError(f"{ATTR}: {where}: {len(offsets)} offsets for {len(buffers)} buffers")
            buckets.append(BucketPlan(
                tuple((k, integer(dims, k, where + " dims")) for k in dims.data), offsets,
                integer(b, "peak", where), integer(b, "no_reuse", where), integer(b, "kv", where),
            ))
        return MemoryPlan(integer(attr, "alignment", "the plan"), tuple(buffers), aliases, outputs, tuple(buckets))


# analysis -----------------------------------------------------------------------------------


def storage_bytes(t: TensorType) -> Dim:
    """Bytes a tensor of type ``t`` occupies, packed sub-byte types rounded up to a whole byte."""
    return sy.floordiv(sy.add(sy.mul(t.numel(), t.dtype.bits), 7), 8)


def aligned(d: Dim, alignment: int) -> Dim:
    """``d`` rounded up to a multiple of ``alignment``, as a dim."""
    return sy.mul(sy.floordiv(sy.add(d, alignment - 1), alignment), alignment)


def plan_memory(func: FuncOp, buckets: Mapping[str, Sequence[int]],
                alignment: int = DEFAULT_ALIGNMENT) -> MemoryPlan:
    """The memory plan of ``func`` (see the module docstring) for the given bounds per symbol.

    ``buckets`` maps each symbol to its upper bounds; every symbol the func uses needs at least
    one, others are ignored. Raises ``PlanError`` naming the func and the symbol otherwise.
    Deterministic: the result depends only on the IR and the arguments.
    """
    fname = func.sym_name.data
    if alignment <= 0:
        raise PlanError(f"plan-memory: alignment must be positive, got {alignment}")
    block = func.body.block
    kernels = [op for op in block.ops if isinstance(op, KernelOp)]
    order = {k: n for n, k in enumerate(kernels)}
    names = [_kernel_name(k, n) for n, k in enumerate(kernels)]
    if len(set(names)) != len(names):
        dup = next(x for x in names if names.count(x) > 1)
        raise PlanError(f"plan-memory: @{fname}: two kernels are named {dup!r}; kernel names must be unique")
    returned: dict[SSAValue, int] = {}
    ret = block.last_op
    if isinstance(ret, ReturnOp):
        for n, v in enumerate(ret.arguments):
            returned.setdefault(v, n)
    args = list(block.args)

    buffers: list[Buffer] = []
    aliases: list[KVAlias] = []
    outputs: list[Output] = []
    alias_arg: dict[SSAValue, BlockArgument] = {}
    for k, kname in zip(kernels, names, strict=True):
        for r in k.results:
            rid = f"{kname}#{r.index}"
            arg = _kv_target(k, r, alias_arg)
            if arg is not None and arg.owner is block:
                alias_arg[r] = arg
                aliases.append(KVAlias(rid, arg.index, arg.name_hint or "", storage_bytes(_tensor(arg))))
            elif r in returned:
                outputs.append(Output(rid, returned[r]))
            else:
                first = order[k]
                last = max([first, *(order[u.operation] for u in r.uses if u.operation in order)])
                buffers.append(Buffer(rid, aligned(storage_bytes(_tensor(r)), alignment), first, last))

    kv_args: dict[int, Dim] = {}
    for a in aliases:
        kv_args.setdefault(a.arg, a.bytes)
    used: set[str] = set()
    for v in [*args, *(ret.arguments if isinstance(ret, ReturnOp) else ())]:
        if isinstance(v.type, TensorType):
            used |= v.type.symbols()
    for b in buffers:
        used |= sy.symbols_of(b.bytes)
    symbols = sorted(used)
    for s in symbols:
        bounds = buckets.get(s)
        if not bounds:
            raise PlanError(f"plan-memory: @{fname}: no bucket bounds for symbol '{s}'")
        if any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in bounds):
            raise PlanError(f"plan-memory: bucket bounds for '{s}' must be integers >= 1, got {list(bounds)}")
    plans = []
    for values in itertools.product(*(sorted(set(buckets[s])) for s in symbols)):
        env = dict(zip(symbols, values, strict=True))
        sizes = [sy.evaluate(b.bytes, env) for b in buffers]
        offsets = place(buffers, sizes)
        peak = max((o + s for o, s in zip(offsets, sizes, strict=True)), default=0)
        kv = sum(sy.evaluate(d, env) for d in kv_args.values())
        plans.append(BucketPlan(tuple(env.items()), tuple(offsets), peak, sum(sizes), kv))
    return MemoryPlan(alignment, tuple(buffers), tuple(aliases), tuple(outputs), tuple(plans))


def place(buffers: Sequence[Buffer], sizes: Sequence[int]) -> list[int]:
    """Greedy best-fit offsets, largest buffer first; lifetime-overlapping buffers stay disjoint."""
    offsets: list[int] = [0] * len(buffers)
    placed: list[int] = []
    for n in sorted(range(len(buffers)), key=lambda n: (-sizes[n], buffers[n].first, n)):
        live = sorted((offsets[m], offsets[m] + sizes[m]) for m in placed if buffers[m].overlaps(buffers[n]))
        best: tuple[int, int] | None = None  # (gap size, offset)
        top = 0
        for start, end in live:
            gap = start - top
            if gap >= sizes[n] and (best is None or gap < best[0]):
                best = (gap, top)
            top = max(top, end)
        offsets[n] = best[1] if best is not None else top
        placed.append(n)
    return offsets


def _kernel_name(k: KernelOp, n: int) -> str:
    attr = k.attributes.get("name")
    return attr.data if isinstance(attr, StringAttr) else f"kernel{n}"


def _tensor(v: SSAValue) -> TensorType:
    assert isinstance(v.type, TensorType), f"expected an ix tensor, got {v.type}"
    return v.type


def _kv_target(k: KernelOp, r: OpResult, alias_arg: Mapping[SSAValue, BlockArgument]) -> BlockArgument | None:
    """The function argument that kernel result ``r`` writes in place, or None if it is no KV write."""
    last = k.body.block.last_op
    assert isinstance(last, YieldOp)
    v: SSAValue = last.values[r.index]
    if not isinstance(v.owner, KVWriteOp):
        return None
    while isinstance(v.owner, KVWriteOp):
        v = v.owner.cache
    if not isinstance(v, BlockArgument) or v.owner is not k.body.block:
        return None
    outer = k.inputs[v.index]
    if isinstance(outer, BlockArgument):
        return outer
    return alias_arg.get(outer)


# pass ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanMemory(ModulePass):
    """Attaches ``ix.memory_plan`` to every func; see the module docstring for the contract.

    ``batch`` and ``seq`` are the bucket bounds of those symbols, ``max-ctx`` the one bound of
    ``ctx`` (the KV caches' length); ``extra-dims`` gives other symbols' bounds as
    ``"name=1:8:64;other=4"``.
    """

    name = "plan-memory"

    batch: tuple[int, ...] = (1, 4, 16, 64)
    seq: tuple[int, ...] = (1, 512, 2048)
    max_ctx: int = 4096
    alignment: int = DEFAULT_ALIGNMENT
    extra_dims: str = ""

    def buckets(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {"batch": tuple(self.batch), "seq": tuple(self.seq), "ctx": (self.max_ctx,)}
        for item in filter(None, (s.strip() for s in self.extra_dims.split(";"))):
            name, _, values = (part.strip() for part in item.partition("="))
            bounds = values.split(":")
            if not name.isidentifier() or not all(b.strip().isdigit() for b in bounds):
                raise IRError(f"plan-memory: bad extra-dims entry {item!r}; expected 'name=1:8:64'")
            out[name] = tuple(int(b) for b in bounds)
        return out

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        buckets = self.buckets()
        for func in [o for o in op.ops if isinstance(o, FuncOp)]:
            try:
                plan = plan_memory(func, buckets, self.alignment)
            except PlanError as e:
                raise IRError(str(e)) from None
            func.attributes[ATTR] = plan.to_attr()


def read_plan(func: FuncOp) -> MemoryPlan | None:
    """The plan plan-memory attached to ``func``, or None if it has none."""
    attr = func.attributes.get(ATTR)
    return None if attr is None else MemoryPlan.from_attr(attr)


def memory_report(plans: Mapping[str, MemoryPlan]) -> str:
    """A table per func: one row per bucket with peak, no-reuse and KV-cache bytes."""
    header = ("func", "bucket", "buffers", "peak bytes", "no-reuse bytes", "saved", "KV bytes")
    rows: list[tuple[str, ...]] = []
    for fname, plan in plans.items():
        for b in plan.buckets:
            saved = f"{1 - b.peak / b.no_reuse:.0%}" if b.no_reuse else "-"
            rows.append((fname, ", ".join(f"{k}={v}" for k, v in b.dims), str(len(plan.buffers)),
                         f"{b.peak:,}", f"{b.no_reuse:,}", saved, f"{b.kv:,}"))
    widths = [max(len(r[c]) for r in [header, *rows]) for c in range(len(header))]
    lines = ["  ".join(h.ljust(w) if c < 2 else h.rjust(w) for c, (h, w) in enumerate(zip(r, widths, strict=True)))
             for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def module_report(module: ModuleOp) -> str:
    """``memory_report`` of the plans attached to ``module``'s funcs (after plan-memory)."""
    plans = {}
    for f in module.ops:
        if isinstance(f, FuncOp):
            plan = read_plan(f)
            if plan is not None:
                plans[f.sym_name.data] = plan
    return memory_report(plans)
