"""What code generation produces for one ``ix.kernel``: Triton source plus how to launch it.
It lives in the runtime because loading an artifact needs it and must not import the compiler.

A ``KernelSource`` is plain data (it goes into the artifact's launch plan as JSON): the module
text holding one ``@triton.jit`` function, its parameters in order and what each binds to, the
grid as expressions over the symbolic dims (the grammar of ``inferx.runtime.expr``), the
compile-time constants, which outputs are written in place into an input (the KV cache), and the
scratch buffers the kernel needs between its own programs (split-KV partials, arrival counters:
zeroed when allocated; a kernel must be correct from whatever state its previous launch left, so a
captured graph can replay it). ``source_problem`` checks a source against what it promises.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

ParamKind = Literal["in", "out", "sym", "scratch"]


@dataclass(frozen=True)
class Param:
    """One kernel parameter: input/output pointer ``index`` of the ix.kernel, a scratch buffer
    ``index``, or a symbol's value."""

    name: str
    kind: ParamKind
    index: int = -1
    symbol: str = ""
    dtype: str = ""  # ix dtype of a pointer's elements


@dataclass(frozen=True)
class Scratch:
    """A buffer private to one launch: ``shape`` as expressions over ``S_<symbol>``."""

    shape: tuple[str, ...]
    dtype: str


@dataclass(frozen=True)
class KernelSource:
    name: str
    template: str
    source: str
    params: tuple[Param, ...]
    grid: tuple[str, ...]  # expressions over S_<symbol> names and cdiv/min/max (inferx.runtime.expr)
    constexprs: dict[str, int] = field(default_factory=dict)
    aliases: dict[int, int] = field(default_factory=dict)  # output index -> input index
    num_warps: int = 4
    num_stages: int = 2
    schedule_origin: str = "heuristic"
    scratch: tuple[Scratch, ...] = ()
    grid_dependency: bool = False  # starts with griddepcontrol.wait: safe to launch with PDL
    # How a runtime counts the launch's bytes and FLOPs (its family's ``launch_cost``).
    cost: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """A launch of no programs (a grid dim of "0": a row bucket's kernel with nothing to do),
        which runtimes leave out."""
        return "0" in self.grid

    def to_json(self) -> dict:
        d = asdict(self)
        d["aliases"] = {str(k): v for k, v in self.aliases.items()}
        return d

    @staticmethod
    def from_json(d: dict) -> KernelSource:
        return KernelSource(
            name=d["name"],
            template=d["template"],
            source=d["source"],
            params=tuple(Param(**p) for p in d["params"]),
            grid=tuple(d["grid"]),
            constexprs=dict(d["constexprs"]),
            aliases={int(k): v for k, v in d["aliases"].items()},
            num_warps=d["num_warps"],
            num_stages=d["num_stages"],
            schedule_origin=d["schedule_origin"],
            scratch=tuple(Scratch(tuple(x["shape"]), x["dtype"]) for x in d.get("scratch", ())),
            grid_dependency=bool(d.get("grid_dependency", False)),
            cost=dict(d.get("cost", {})),
        )


def source_problem(ks: KernelSource) -> str | None:
    """Why ``ks.source`` is not the module ``ks`` describes, or None: it must define, at its top
    level, a ``@triton.jit`` function named ``ks.name`` whose parameters are those of ``ks.params``
    in order, then the compile-time constants. The text is parsed, never run."""
    try:
        tree = ast.parse(ks.source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return f"not Python source: {type(e).__name__}: {e}"
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == ks.name), None)
    if fn is None:
        return f"defines no function {ks.name!r} at its top level"
    if not any(
        isinstance(d, ast.Attribute) and d.attr == "jit" and isinstance(d.value, ast.Name) and d.value.id == "triton"
        for d in fn.decorator_list
    ):
        return f"function {ks.name!r} is not decorated with @triton.jit"
    a = fn.args
    names = [p.arg for p in a.args]
    params = [p.name for p in ks.params]
    if (
        a.posonlyargs
        or a.vararg
        or a.kwonlyargs
        or a.kwarg
        or a.defaults
        or names[: len(params)] != params
        or sorted(names[len(params) :]) != sorted(ks.constexprs)
    ):
        declared = ", ".join(params + sorted(ks.constexprs))
        text = ", ".join(names)
        return f"function {ks.name!r} takes ({text[:200]}), not the parameters the manifest declares ({declared[:200]})"
    return None
