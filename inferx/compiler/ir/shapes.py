"""Shape rules shared by the op verifiers, the builders, fusion and memory planning.

Each function takes dims (ints or ``SymExpr``) and returns dims, or raises ``ShapeError`` with the
rule that was broken. A rule holds for every value of the symbols or it is refused: two symbolic
dims are equal only when their canonical forms are equal.
"""

from __future__ import annotations

from collections.abc import Sequence

from inferx.compiler.ir import symbolic as sy
from inferx.compiler.ir.symbolic import Dim
from inferx.compiler.ir.types import format_shape


class ShapeError(ValueError):
    """A shape or dtype rule broken by an op; the message names the rule."""


def fmt(d: Dim) -> str:
    return sy.format_dim(d)


def broadcast(a: Sequence[Dim], b: Sequence[Dim]) -> tuple[Dim, ...]:
    """NumPy broadcasting: dims align from the right; equal dims stay, a literal 1 stretches."""
    out: list[Dim] = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise ShapeError(
                f"shapes {format_shape(a)} and {format_shape(b)} do not broadcast: "
                f"dim -{i} is {fmt(da)} vs {fmt(db)}"
            )
    return tuple(reversed(out))


def broadcasts_to(src: Sequence[Dim], dst: Sequence[Dim]) -> None:
    """Checks that ``src`` broadcasts to exactly ``dst`` (a one-way broadcast)."""
    if len(src) > len(dst):
        raise ShapeError(f"cannot broadcast rank {len(src)} {format_shape(src)} to lower rank {len(dst)}")
    for i in range(1, len(src) + 1):
        if src[-i] != dst[-i] and src[-i] != 1:
            raise ShapeError(
                f"cannot broadcast {format_shape(src)} to {format_shape(dst)}: "
                f"dim -{i} is {fmt(src[-i])}, needs 1 or {fmt(dst[-i])}"
            )


def norm_axis(axis: int, rank: int, what: str = "dim") -> int:
    if not -rank <= axis < max(rank, 1):
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def same(a: Dim, b: Dim, what: str) -> None:
    if a != b:
        raise ShapeError(f"{what}: {fmt(a)} vs {fmt(b)}")


def divides(small: int, big: Dim, what: str) -> None:
    """The constant ``small`` divides ``big`` for every value of its symbols."""
    if small <= 0 or sy.mul(sy.floordiv(big, small), small) != big:
        raise ShapeError(f"{what}: cannot prove {small} divides {fmt(big)}")


def slice_size(size: Dim, start: Dim, end: Dim, step: int) -> Dim:
    if step <= 0:
        raise ShapeError(f"slice step must be positive, got {step}")
    def refuse(gap: Dim, static: str, symbolic: str) -> None:
        if not sy.is_provably_nonnegative(gap):
            raise ShapeError(static if sy.is_static(gap) else symbolic)

    for name, bound in (("start", start), ("end", end)):
        refuse(bound, f"slice {name} {fmt(bound)} is negative",
               f"slice {name} {fmt(bound)} is not provably >= 0")
    length = sy.sub(end, start)
    refuse(length, f"slice end {fmt(end)} is before start {fmt(start)}",
           f"slice end {fmt(end)} is not provably >= start {fmt(start)}")
    refuse(sy.sub(size, end), f"slice end {fmt(end)} is past the dim size {fmt(size)}",
           f"slice end {fmt(end)} is not provably <= the dim size {fmt(size)}")
    return sy.floordiv(sy.add(length, step - 1), step)
