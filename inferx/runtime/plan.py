"""Binding an entry point's launch plan (the artifact's ``entries[...]``) to tensors.

``bind`` resolves every launch's inputs and outputs for one set of symbol values: arguments by
index, weights by name, buffers allocated once through ``empty`` (an output the kernel writes
in place, such as a KV cache, is the input it aliases), scratch buffers through ``zeros``. The
result is a list of ready launches that ``run`` replays; the same list is what a CUDA Graph
captures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from inferx.runtime.kernel_source import KernelSource
from inferx.runtime.triton_kernels import grid


@dataclass(frozen=True)
class Launch:
    fn: Any
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    kwargs: dict[str, int]


def eval_dim(expr: str, env: Mapping[str, int]) -> int:
    """A dim of the plan (a Python expression over ``S_<symbol>``) at the given symbol values."""
    return int(eval(expr, {"__builtins__": {}}, {f"S_{k}": v for k, v in env.items()}))  # noqa: S307


def kernel_for(step: Mapping[str, Any], batch: int, seq: int) -> str:
    """The kernel a launch runs at its rows (batch x seq: a prompt's tokens; batch where the
    launch says ``"rows": "batch"``: a decode kernel, in decode or in the tail of prefill_last):
    the variant of the smallest row bucket that holds them when the launch has per-bucket
    variants (``by_rows``), else the last variant, else its one kernel."""
    rows = batch if step.get("rows") == "batch" else batch * seq
    for bound, name in step.get("by_rows", ()):
        if rows <= bound:
            return str(name)
    return str(step["by_rows"][-1][1] if "by_rows" in step else step["kernel"])


def bind(plan: Mapping[str, Any], kernels: Mapping[str, tuple[KernelSource, Any]], args: Sequence[Any],
         weights: Mapping[str, Any], env: Mapping[str, int], empty: Callable[[list[int], str], Any],
         zeros: Callable[[list[int], str], Any] | None = None) -> tuple[list[Launch], list[Any]]:
    """The launches of ``plan`` with every argument bound, and the tensors the entry returns."""
    buffers: dict[str, Any] = {}

    def resolve(b: Mapping[str, Any]) -> Any:
        kind = b["kind"]
        if kind == "arg":
            return args[b["index"]]
        if kind == "buffer":
            return buffers[b["name"]]
        return weights[b["name"]]

    launches: list[Launch] = []
    for step in plan["launches"]:
        ks, fn = kernels[kernel_for(step, env["batch"], env["seq"])]
        ins = [resolve(b) for b in step["inputs"]]
        outs = []
        for i, b in enumerate(step["outputs"]):
            if i in ks.aliases:
                t = ins[ks.aliases[i]]
            else:
                spec = plan["buffers"][b["name"]]
                t = empty([eval_dim(d, env) for d in spec["shape"]], spec["dtype"])
            buffers[b["name"]] = t
            outs.append(t)
        scratch = [(zeros or empty)([eval_dim(d, env) for d in sc.shape], sc.dtype) for sc in ks.scratch]
        if ks.scratch and zeros is None:
            raise ValueError(f"kernel {ks.name} needs zeroed scratch buffers: pass zeros=")
        by_kind = {"in": ins, "out": outs, "scratch": scratch}
        call = tuple(by_kind[p.kind][p.index] if p.kind in by_kind else int(env[p.symbol]) for p in ks.params)
        kwargs = dict(ks.constexprs, num_warps=ks.num_warps, num_stages=ks.num_stages)
        launches.append(Launch(fn, grid(ks, env), call, kwargs))
    return launches, [resolve(b) for b in plan["returns"]]


def run(launches: Sequence[Launch]) -> None:
    for ln in launches:
        ln.fn[ln.grid](*ln.args, **ln.kwargs)
