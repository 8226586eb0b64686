"""Per-linear precision: a precision map names, for each linear of a program (by its weight's
name), how it runs: ``float`` (the program's dtype), ``fp8`` (FP8 W8A8, ``inferx.compiler.ir.fp8``)
or an int4 scheme (``int4-g128``, ``-g64``, ``-g32``, optionally ``-sym``: weights only,
``inferx.compiler.ir.quant``).

A map comes from the compile options (``quant`` for every linear but the LM head, ``quant_head``,
then ``quant_overrides``, the first matching pattern winning), from a JSON file the user wrote or
edited (``--precision-map``), or from the precision planner (``--quant auto``,
``inferx.compiler.quant.planner``). As a file::

    {"format": "inferx-precision-map", "version": 1,
     "layers": {"model.layers.0.self_attn.q_proj.weight": "fp8", ...},
     ...}                                   (other keys: what the planner measured; kept, not read)

A file must name every linear of the model and nothing else: a linear left out would be a
silent choice (``PrecisionError`` names what is missing or unknown).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from inferx.compiler.ir.quant import SchemeError, parse_scheme
from inferx.passes.quantize import candidates, embedding_tables, selects

FLOAT, FP8 = "float", "fp8"
FORMAT, VERSION = "inferx-precision-map", 1


class PrecisionError(ValueError):
    """A precision map, or a precision in one, that cannot be used; the message names it."""


def check_precision(value: object, where: str) -> str:
    """``value`` as a precision (``float``, ``fp8`` or an int4 scheme's name); PrecisionError
    naming ``where`` otherwise."""
    if value in (FLOAT, FP8):
        return str(value)
    if isinstance(value, str):
        try:
            return parse_scheme(value).name
        except SchemeError:
            pass
    raise PrecisionError(f"{where}: unknown precision {value!r}: the precisions are float, fp8 and the int4 "
                         "schemes int4-g128, int4-g64, int4-g32 (each optionally -sym)")


def is_int4(precision: str) -> bool:
    return precision not in (FLOAT, FP8)


def linear_weights(module: ModuleOp) -> list[str]:
    """The weights of the program's linears (each once, in program order)."""
    return list(dict.fromkeys(lin.weight.owner.attributes["name"].data  # type: ignore[union-attr]
                              for lin in candidates(module)))


def units(module: ModuleOp) -> list[list[str]]:
    """The linears grouped as the compiler runs them: those that read one value (q|k|v, gate|up)
    form one unit, merged into one GEMM when they share a precision; every other linear is a
    unit of its own. In program order, each once (the entry points repeat them)."""
    out: dict[tuple[str, ...], None] = {}
    for func in module.ops:
        by_input: dict[SSAValue, list[str]] = {}
        for lin in candidates(func):  # type: ignore[arg-type]
            name = lin.weight.owner.attributes["name"].data  # type: ignore[union-attr]
            group = by_input.setdefault(lin.input, [])
            if name not in group:
                group.append(name)
        out.update(dict.fromkeys(tuple(g) for g in by_input.values()))
    return [list(g) for g in out]


def from_options(module: ModuleOp, quant: str, head: bool, overrides: tuple[str, ...]) -> dict[str, str]:
    """The map the compile options give: ``quant`` (fp8 or an int4 scheme) for every linear but
    the LM head (it too with ``head``), float for the rest, then each ``PATTERN=PRECISION`` of
    ``overrides`` for the weights it matches (the first match wins)."""
    default = check_precision(quant, "quant")
    rules = parse_rules(overrides)
    tables = embedding_tables(module)
    out = {}
    for name in linear_weights(module):
        rule = next((p for pattern, p in rules if fnmatchcase(name, pattern)), None)
        out[name] = rule if rule is not None else default if selects(name, tables, "*", "", head) else FLOAT
    return out


def parse_rules(overrides: tuple[str, ...]) -> list[tuple[str, str]]:
    """(pattern, precision) of each ``PATTERN=PRECISION`` rule; PrecisionError naming a rule that is
    not one."""
    rules = []
    for item in overrides:
        for part in (p.strip() for p in item.split(",")):
            if not part:
                continue
            pattern, eq, value = part.partition("=")
            if not eq or not pattern.strip() or not value.strip():
                raise PrecisionError(f"override {part!r}: write it PATTERN=PRECISION (e.g. '*down_proj*=float', "
                                     "'*q_proj*=fp8', '*mlp*=int4-g32')")
            rules.append((pattern.strip(), check_precision(value.strip(), f"override {part!r}")))
    return rules


def check_map(module: ModuleOp, pmap: Mapping[str, str], source: str) -> dict[str, str]:
    """``pmap`` checked against the program: every linear named, no other name, each precision
    known; the map with precisions normalized. PrecisionError naming ``source`` and what is
    wrong."""
    names = linear_weights(module)
    unknown = [n for n in pmap if n not in names]
    if unknown:
        raise PrecisionError(f"{source}: {len(unknown)} name(s) that are not linears of this model, e.g. "
                             f"{unknown[0]!r}; its linears are named like {names[0]!r}")
    missing = [n for n in names if n not in pmap]
    if missing:
        raise PrecisionError(f"{source}: {len(missing)} of the model's {len(names)} linears not named, e.g. "
                             f"{missing[0]!r}: a map gives every linear's precision (float to keep one float)")
    return {n: check_precision(pmap[n], f"{source}: {n}") for n in names}


def read_map(path: Path) -> dict[str, Any]:
    """The JSON document of a precision map file (its ``layers`` a dict of strings); PrecisionError
    naming the file and what is wrong. Nothing in it is executed."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise PrecisionError(f"{path}: cannot be read ({e.strerror or e})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PrecisionError(f"{path}: not a JSON precision map ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise PrecisionError(f"{path}: not a precision map (its \"format\" must be {FORMAT!r})")
    if doc.get("version") != VERSION:
        raise PrecisionError(f"{path}: precision map version {doc.get('version')!r}; this compiler reads {VERSION}")
    layers = doc.get("layers")
    if not isinstance(layers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in layers.items()):
        raise PrecisionError(f"{path}: \"layers\" must be an object of weight name: precision strings")
    return doc


def document(pmap: Mapping[str, str], **extra: Any) -> dict[str, Any]:
    """The JSON document of ``pmap`` (``extra``: what the planner measured, kept beside it)."""
    return {"format": FORMAT, "version": VERSION, "layers": dict(pmap), **extra}


def summary(pmap: Mapping[str, str]) -> str:
    """``N float, M fp8, L int4-g128`` in the order float, fp8, int4 schemes."""
    counts: dict[str, int] = {}
    for p in pmap.values():
        counts[p] = counts.get(p, 0) + 1
    order = sorted(counts, key=lambda p: (p != FLOAT, p != FP8, p))
    return ", ".join(f"{counts[p]} {p}" for p in order)
