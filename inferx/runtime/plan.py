"""Binding an entry point's launch plan (``inferx.runtime.manifest.EntryPlan``) to tensors: the one
binder every session uses.

``resolve`` walks an entry's launches in order: it picks each launch's kernel variant at the rows
it is bound for and resolves the launch's inputs and outputs: arguments by index, weights by name,
buffers through ``buffer`` the first time a name is written (an output the kernel writes in
place, such as a KV cache, is the input it aliases), scratch buffers through ``scratch``. What
those make (torch tensors, device addresses) and whether they are kept across binds is the
caller's. ``bind`` turns the result into launches of Triton's launcher that ``run`` replays (the
same list is what a CUDA Graph captures); ``CudaSession`` into launches of the CUDA driver API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from inferx.runtime import expr
from inferx.runtime.kernel_source import KernelSource, Scratch
from inferx.runtime.manifest import Binding, BufferSpec, EntryPlan, LaunchStep
from inferx.runtime.triton_kernels import grid

T = TypeVar("T")


@dataclass(frozen=True)
class Launch:
    fn: Any
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    kwargs: dict[str, int]


def eval_dim(text: str, env: Mapping[str, int]) -> int:
    """A dim of the plan (an expression over ``S_<symbol>``, ``inferx.runtime.expr``) at the given
    symbol values."""
    return expr.evaluate(text, env)


@dataclass(frozen=True)
class Resolved(Generic[T]):
    """Launch ``index`` of a plan: its kernel variant (``source``, and ``kernel``, what the caller
    loaded for it) and the tensors of its inputs, outputs and scratch buffers."""

    index: int
    step: LaunchStep
    source: KernelSource
    kernel: Any
    inputs: list[T]
    outputs: list[T]
    scratch: list[T]

    def values(self, env: Mapping[str, int]) -> list[T | int]:
        """The kernel's parameters in order: tensors by kind and index, symbols at ``env``."""
        by_kind = {"in": self.inputs, "out": self.outputs, "scratch": self.scratch}
        return [by_kind[p.kind][p.index] if p.kind in by_kind else int(env[p.symbol]) for p in self.source.params]


def resolve(
    plan: EntryPlan,
    kernels: Mapping[str, tuple[KernelSource, Any]],
    rows: tuple[int, int],
    args: Sequence[T],
    weights: Mapping[str, T],
    buffer: Callable[[str, BufferSpec], T],
    scratch: Callable[[str, Scratch], T],
    buffers: dict[str, T] | None = None,
) -> tuple[list[Resolved[T]], list[T]]:
    """Every launch of ``plan`` resolved, and the tensors the entry returns.

    ``rows``: the (batch, seq) that picks each launch's kernel variant (``LaunchStep.kernel_for``).
    ``buffer(name, spec)`` makes a buffer the first time a launch writes it; ``buffers`` holds
    those already made (kept by a caller that reuses them across binds) and is filled in.
    ``scratch(name, spec)`` gives scratch buffer j of launch i, named ``<kernel>#scratch<j>@<i>``."""
    made: dict[str, T] = {} if buffers is None else buffers

    def tensor(b: Binding) -> T:
        if b.kind == "arg":
            return args[b.index]
        return made[b.name] if b.kind == "buffer" else weights[b.name]

    out: list[Resolved[T]] = []
    for i, step in enumerate(plan.launches):
        ks, fn = kernels[step.kernel_for(*rows)]
        ins = [tensor(b) for b in step.inputs]
        outs = []
        for j, b in enumerate(step.outputs):
            if j in ks.aliases:
                made[b.name] = ins[ks.aliases[j]]
            elif b.name not in made:
                made[b.name] = buffer(b.name, plan.buffers[b.name])
            outs.append(made[b.name])
        held = [scratch(f"{step.kernel}#scratch{j}@{i}", sc) for j, sc in enumerate(ks.scratch)]
        out.append(Resolved(i, step, ks, fn, ins, outs, held))
    return out, [tensor(b) for b in plan.returns]


def bind(
    plan: EntryPlan,
    kernels: Mapping[str, tuple[KernelSource, Any]],
    args: Sequence[Any],
    weights: Mapping[str, Any],
    env: Mapping[str, int],
    empty: Callable[[list[int], str], Any],
    zeros: Callable[[list[int], str], Any] | None = None,
) -> tuple[list[Launch], list[Any]]:
    """The launches of ``plan`` at the symbol values ``env`` with every argument bound (buffers
    made by ``empty``, scratch by ``zeros``), and the tensors the entry returns. Launches of no
    programs (``KernelSource.empty``) are left out."""

    def buffer(name: str, spec: BufferSpec) -> Any:
        return empty([eval_dim(d, env) for d in spec.shape], spec.dtype)

    def scratch(name: str, sc: Scratch) -> Any:
        if zeros is None:
            raise ValueError(f"{name} is a zeroed scratch buffer: pass zeros=")
        return zeros([eval_dim(d, env) for d in sc.shape], sc.dtype)

    resolved, returns = resolve(plan, kernels, (env["batch"], env["seq"]), args, weights, buffer, scratch)
    launches = [
        Launch(
            r.kernel,
            grid(r.source, env),
            tuple(r.values(env)),
            dict(r.source.constexprs, num_warps=r.source.num_warps, num_stages=r.source.num_stages),
        )
        for r in resolved
        if not r.source.empty
    ]
    return launches, returns


def run(launches: Sequence[Launch]) -> None:
    for ln in launches:
        ln.fn[ln.grid](*ln.args, **ln.kwargs)
