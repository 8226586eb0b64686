"""Packages depend one way and never in a circle.

The layers, lowest first (a module may import its own layer and the ones below it):

    runtime      inferx.runtime, inferx.signals (loads and runs artifacts; imports nothing above)
    ir           inferx.compiler.ir, inferx.compiler.interpreter, inferx.models, inferx.program
    passes       inferx.passes
    families     inferx.compiler.families (one folder per kernel family, and their registry)
    compiler     the rest of inferx.compiler (frontends, pipeline, build, manifest, driver)
    tuner        inferx.autotune
    top          inferx.cli, inferx.benchmark, the package's own __init__ (the public API)

Every import counts, at module level or inside a function (a lazy import still makes the
dependency), except those under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "inferx"
LAYERS = [
    ("runtime", ("inferx.runtime", "inferx.signals")),
    ("ir", ("inferx.compiler.ir", "inferx.compiler.interpreter", "inferx.models", "inferx.program")),
    ("passes", ("inferx.passes",)),
    ("families", ("inferx.compiler.families",)),
    ("compiler", ("inferx.compiler",)),
    ("tuner", ("inferx.autotune",)),
    ("top", ("inferx.cli", "inferx.benchmark", "inferx")),
]


def layer_of(module: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no layer")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The inferx modules ``path`` imports (a name imported from a package counts as its submodule
    when there is one)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for sub in child.orelse:
                    visit(sub)
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names if a.name.split(".")[0] == "inferx")
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - child.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                if base.split(".")[0] != "inferx":
                    continue
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    out.add(sub if sub in known else base)
            visit(child)

    visit(ast.parse(path.read_text()))
    out.discard(me)
    return out


def graph() -> dict[str, set[str]]:
    paths = sorted(ROOT.rglob("*.py"))
    known = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, known) for p in paths}


def test_layers_depend_one_way() -> None:
    bad = []
    for mod, deps in sorted(graph().items()):
        for dep in sorted(deps):
            if layer_of(dep) > layer_of(mod):
                bad.append(f"{mod} ({LAYERS[layer_of(mod)][0]}) imports {dep} ({LAYERS[layer_of(dep)][0]})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_the_runtime_imports_nothing_of_the_compiler_or_tuner() -> None:
    g = graph()
    bad = [f"{m} imports {d}" for m, deps in sorted(g.items()) if layer_of(m) == 0
           for d in sorted(deps) if layer_of(d) != 0]
    assert not bad, "\n".join(bad)


def test_no_import_circles() -> None:
    g = graph()
    # packages' __init__ importing their own submodules is how a package exposes them, not a circle
    edges = {m: {d for d in deps if not m.startswith(d + ".") and not d.startswith(m + ".")} for m, deps in g.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    circles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in edges:
                continue
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_every_module_is_in_a_layer() -> None:
    for mod in graph():
        layer_of(mod)


def who_imports() -> dict[str, set[str]]:
    """Reverse edges, for reading failures by hand."""
    rev: dict[str, set[str]] = defaultdict(set)
    for m, deps in graph().items():
        for d in deps:
            rev[d].add(m)
    return rev
