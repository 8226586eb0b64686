"""quantize: the linears a scheme names become ``ix.qlinear`` over quantized weights.

    %w = ix.weight {name = "W"} : [N, K] bf16         %c = ix.weight {name = "W.int4-g128.codes"} : [N, K] i4
    %y = ix.linear %x, %w                       ->    %s = ix.weight {name = "W.int4-g128.scales"} : [N, K/128] bf16
                                                      %m = ix.weight {name = "W.int4-g128.mins"} : [N, K/128] bf16
                                                      %y = ix.qlinear %x, %c, %s mins %m {group = 128}

The new weights are named by ``quant.quantized_names``; the program's weight store serves them
(``inferx.compiler.quant``: computed from ``W`` by the chosen method, or read as they are from a
checkpoint that arrives quantized). Scales and minimums take the weight's dtype.

Per-layer overrides (``overrides``: ``PATTERN=SCHEME`` or ``PATTERN=float``, the first match
wins) give a weight its own scheme, or keep it float, before the rules below.

Applies to an ``ix.linear`` whose weight is an ``ix.weight`` (a bias stays float, the qlinear's
``bias`` operand; a weight in the "kn" layout, [K, N] as GPT-2 stores it, is quantized as its
transpose: ``kn_weights`` names them for the store),
named by ``include`` and by no pattern of ``exclude`` (comma-separated ``fnmatch`` patterns on the
weight's name; the default includes every linear). The LM head (a weight named ``*lm_head*``, or
the embedding table a tied head reads) is left in float unless ``head`` is set. A linear the
pass would quantize whose K the group does not divide stops it with an error naming the weight.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.ops_base import int_attr
from inferx.compiler.ir.quant import Scheme, SchemeError, parse_scheme, quantized_names
from inferx.compiler.ir.textio import IRError
from inferx.compiler.ir.types import DType, TensorType


def _name(w: t.WeightOp) -> str:
    return w.attributes["name"].data  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Quantize(ModulePass):
    name = "quantize"

    scheme: str = "int4-g128"
    include: str = "*"
    exclude: str = ""
    head: bool = False
    # Per-layer overrides, "PATTERN=SCHEME,PATTERN=float,...": the first pattern that matches a
    # weight's name gives its scheme (or keeps it float), before include, exclude and head apply.
    overrides: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        apply_schemes(op, self.schemes(op), kn=True)

    def schemes(self, module: ModuleOp) -> dict[str, Scheme]:
        """{weight name: scheme} of the linears the options name (the pass's precision map)."""
        try:
            scheme = parse_scheme(self.scheme)
            rules = parse_overrides(self.overrides)
        except SchemeError as e:
            raise IRError(f"quantize: {e}") from None
        tables = embedding_tables(module)
        names = {_name(lin.weight.owner) for lin in candidates(module)}  # type: ignore[arg-type]
        out: dict[str, Scheme] = {}
        for name in sorted(names):
            rule = next((r for pattern, r in rules if fnmatchcase(name, pattern)), "default")
            if rule == "default" and selects(name, tables, self.include, self.exclude, self.head):
                out[name] = scheme
            elif isinstance(rule, Scheme):
                out[name] = rule
        return out


def embedding_tables(module: ModuleOp) -> set[str]:
    """The weights embedding lookups read (a tied LM head reads one of them)."""
    return {_name(e.table.owner) for e in module.walk() if isinstance(e, nn.EmbeddingOp)  # type: ignore[arg-type]
            and isinstance(e.table.owner, t.WeightOp)}


def selects(name: str, tables: set[str], include: str, exclude: str, head: bool) -> bool:
    """Whether the options name the weight ``name``: matched by ``include`` and by no pattern of
    ``exclude`` (comma-separated ``fnmatch`` patterns), and not the LM head (``*lm_head*`` or an
    embedding table in ``tables``) unless ``head``."""
    if not head and (fnmatchcase(name, "*lm_head*") or name in tables):
        return False
    inc = [p.strip() for p in include.split(",") if p.strip()]
    exc = [p.strip() for p in exclude.split(",") if p.strip()]
    return any(fnmatchcase(name, p) for p in inc) and not any(fnmatchcase(name, p) for p in exc)


def parse_overrides(text: str) -> list[tuple[str, Scheme | None]]:
    """``PATTERN=SCHEME`` rules, comma-separated, in order (None: the weight stays float, written
    ``PATTERN=float``); SchemeError naming the rule that is not one."""
    rules: list[tuple[str, Scheme | None]] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            continue
        pattern, eq, value = item.partition("=")
        if not eq or not pattern.strip() or not value.strip():
            raise SchemeError(f"override {item!r}: write it PATTERN=SCHEME (e.g. '*down_proj*=int4-g32') "
                              "or PATTERN=float")
        value = value.strip()
        rules.append((pattern.strip(), None if value == "float" else parse_scheme(value)))
    return rules


def candidates(module: ModuleOp) -> list[nn.LinearOp]:
    """The linears the pass can rewrite: an ``ix.weight`` weight."""
    return [lin for lin in module.walk() if isinstance(lin, nn.LinearOp) and isinstance(lin.weight.owner, t.WeightOp)]


def is_kn(lin: nn.LinearOp) -> bool:
    return lin.attributes.get("w_layout", StringAttr("nk")) == StringAttr("kn")


def kn_weights(module: ModuleOp) -> set[str]:
    """The weights the pass would quantize as their transpose: those of "kn" linears (stored
    [K, N]; their codes, scales and minimums are [N, K]-shaped like every other's)."""
    return {_name(lin.weight.owner) for lin in candidates(module) if is_kn(lin)}  # type: ignore[arg-type]


def apply_schemes(module: ModuleOp, schemes: Mapping[str, Scheme], scaled: Collection[str] = (),
                  kn: bool = False) -> None:
    """Rewrites each linear the pass can rewrite whose weight ``schemes`` names, under its scheme
    (a precision map; what the pass does with one scheme for the weights its options name); a
    weight in ``scaled`` also gets a ``col_scale`` operand (activation-aware methods). "kn"
    linears only with ``kn`` (their store must serve the transpose's parts: ``kn_weights``)."""
    for lin in candidates(module):
        if is_kn(lin) and not kn:
            continue
        name = _name(lin.weight.owner)  # type: ignore[arg-type]
        scheme = schemes.get(name)
        if scheme is None:
            continue
        wt = lin.weight.type
        assert isinstance(wt, TensorType)
        if is_kn(lin):
            wt = wt.with_shape(tuple(reversed(wt.shape)))
        try:
            scheme.check(tuple(wt.shape), name)  # type: ignore[arg-type]
        except SchemeError as e:
            raise IRError(f"quantize: {e}") from None
        _rewrite(lin, name, wt, scheme, name in scaled)


def _rewrite(lin: nn.LinearOp, name: str, wt: TensorType, scheme: Scheme, col_scale: bool) -> None:
    n, k = wt.shape
    assert isinstance(n, int) and isinstance(k, int)
    names = quantized_names(name, scheme, col_scale)
    group_t = TensorType((n, k // scheme.group), wt.dtype)
    types = {
        "codes": TensorType((n, k), DType.i4), "scales": group_t, "mins": group_t,
        "col_scale": TensorType((k,), wt.dtype),
    }
    parts = {part: t.WeightOp.make(result_types=[types[part]], name=StringAttr(names[part])) for part in names}
    for w in parts.values():
        Rewriter.insert_op(w, InsertPoint.before(lin))
    mins = parts["mins"].results[0] if "mins" in parts else None
    col = parts["col_scale"].results[0] if "col_scale" in parts else None
    q = nn.QLinearOp.make(
        lin.input, parts["codes"].results[0], parts["scales"].results[0], mins, col, lin.bias, None,
        group=int_attr(scheme.group)
    )
    Rewriter.replace_op(lin, q)
