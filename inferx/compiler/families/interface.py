"""The kernel-family interface: everything the compiler, the tuner and the runtime ask of a family.

A family is the code that implements one kind of ``ix.kernel`` (its ``template`` attribute names
the family). It answers, in one object:

- which fused groups it takes: ``anchors`` (the ops that bind a fused group to it, tried in the
  registry's order; none for families that a pass of their own creates) and ``applies`` (a cheap
  check returning the reason its generator cannot implement a kernel, or None);
- its schedule: ``parse_schedule`` (a schedule dict to the family's schedule object, raising
  ``ScheduleError`` with the rule broken: the one statement of validity, used by codegen, the
  tuning database and the search space), ``heuristic`` (the schedule used without a record);
- ``generate``: the Triton source of a kernel under a schedule;
- tuning: ``task`` (the key a record is a measurement of), ``task_from_json``, ``space`` (the
  schedules the tuner searches), ``neighbours`` (other row buckets whose records may stand in);
- cost: ``bound_ms``, ``roofline_ms`` and ``features`` for the roofline and learned cost models
  (by default those of the module ``cost_model`` names);
  ``launch_cost``, the traits the runtime's byte and FLOP counts read from the manifest;
- ``passes``: kernel-IR passes of its own (a fused decode kernel is made by one).

Families that take no schedule (gather, row reductions, pointwise) keep the defaults: no
schedule, no task, no space. The registry (``inferx.compiler.families``) lists them; nothing
outside a family's folder and the registry names one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from xdsl.ir import Operation
from xdsl.passes import ModulePass

from inferx.compiler.families.common.errors import CodegenError
from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.runtime.kernel_source import KernelSource

if TYPE_CHECKING:
    from inferx.compiler.families.common.space import Space

Schedule = dict[str, int]


class ScheduleError(ValueError):
    """A schedule dict its family does not accept; the message says which rule it breaks."""


class TaskError(ValueError):
    """A kernel that has no tuning task (a family with none, or a kernel it cannot key)."""


class AnyTask(Protocol):
    """A tuning task (a frozen dataclass): what a measured schedule is a measurement *of*.
    ``key`` is its canonical JSON text (what the database matches on); ``rows`` the row bucket
    it was keyed at; ``shape`` "decode" (rows are sequences) or "prefill" (rows are tokens);
    ``out_dtype`` the kernel's result dtypes joined by "+"."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def template(self) -> str: ...

    @property
    def rows(self) -> int: ...

    @property
    def shape(self) -> str: ...

    @property
    def out_dtype(self) -> str: ...

    @property
    def key(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


class KernelFamily:
    """The defaults of a family with no schedule; tunable families override the rest."""

    name: str = ""
    anchors: tuple[type[Operation], ...] = ()
    # The family every fused group without an anchor binds to (one, the registry's last).
    fallback: bool = False
    schedule_type: type | None = None
    # Knobs a schedule may leave "off" (their off values): of tied records, the one with the
    # fewest on wins.
    optional_knobs: Mapping[str, int] = {}
    feature_names: tuple[str, ...] = ()
    # For a family a pass of its own makes from other kernels: what it fuses ("decode MLPs") and
    # what it takes, for the error when a model's layers do not fuse.
    fuses: str = ""
    takes: str = ""

    @property
    def tunable(self) -> bool:
        return self.schedule_type is not None

    # --- applicability and code ---------------------------------------------------------------
    def applies(self, kernel: KernelOp) -> str | None:
        return None

    def generate(self, kernel: KernelOp, name: str, schedule: Any, target: str, overlap: bool,
                 grid_wait: bool) -> KernelSource:
        raise NotImplementedError

    def heuristic(self, kernel: KernelOp, target: str, rows: int | None) -> Any:
        return None

    def at_rows(self, kernel: KernelOp, schedule: Any, rows: int | None) -> Any:
        """``schedule`` (a record's or a heuristic's) as the kernel's row bucket ``rows`` runs it
        (None: the largest), with what follows from the bucket rather than from a record set;
        unchanged by default."""
        return schedule

    def parse_schedule(self, d: Mapping[str, Any]) -> Any:
        raise ScheduleError(f"the {self.name} family takes no schedule")

    def record_fits(self, task: AnyTask, schedule: Any) -> str | None:
        """Why a stored schedule (already parsed) cannot run ``task``'s kernel, where that depends
        on the task and not on the schedule alone; None by default. The database skips such a
        record as it skips one its family no longer parses."""
        return None

    def check_schedule(self, name: str, schedule: Any) -> None:
        if schedule is not None and (self.schedule_type is None or not isinstance(schedule, self.schedule_type)):
            raise CodegenError(f"kernel {name}: a {type(schedule).__name__} cannot schedule a {self.name} kernel")

    # --- row buckets --------------------------------------------------------------------------
    def per_batch(self, kernel: KernelOp) -> bool:
        """True where the kernel's rows are the batch (a decode kernel): it is generated for each
        batch bucket, and in a prefill entry's tail its rows are still the batch."""
        return False

    def row_buckets(self, kernel: KernelOp, batches: Sequence[int], max_seq_len: int) -> list[int | None]:
        """The row buckets the kernel is generated for, each with its own schedule (None: one
        kernel for every shape)."""
        return list(batches) if self.per_batch(kernel) else [None]

    # --- tuning -------------------------------------------------------------------------------
    def task(self, kernel: KernelOp, rows: int, max_seq_len: int) -> AnyTask:
        raise TaskError(f"template {self.name} is not tuned")

    def task_from_json(self, d: Mapping[str, Any]) -> AnyTask:
        raise TaskError(f"template {self.name} has no tuning tasks")

    def space(self, hw: Hopper = H200) -> Space:
        raise ValueError(f"no schedule space for template {self.name!r}")

    def neighbours(self, task: AnyTask, rows: int) -> list[AnyTask]:
        """Tasks at another row bucket (``rows``) whose records may stand in for ``task``'s, most
        alike first; none by default."""
        return []

    # --- cost ---------------------------------------------------------------------------------
    # The module of the family's cost model: its ``bound_ms(task, hw)``, ``roofline_ms(task, s,
    # hw)`` and ``features(task, s, hw)`` answer the three calls below (None: no cost model).
    cost_model: ClassVar[Any] = None

    def bound_ms(self, task: AnyTask, hw: Hopper = H200) -> float:
        if self.cost_model is None:
            raise ValueError(f"template {self.name} has no cost model")
        return float(self.cost_model.bound_ms(task, hw))

    def roofline_ms(self, task: AnyTask, s: Mapping[str, int], hw: Hopper = H200) -> float:
        if self.cost_model is None:
            raise ValueError(f"template {self.name} has no cost model")
        return float(self.cost_model.roofline_ms(task, s, hw))

    def features(self, task: AnyTask, s: Mapping[str, int], hw: Hopper = H200) -> list[float]:
        if self.cost_model is None:
            raise ValueError(f"template {self.name} has no cost features")
        return list(self.cost_model.features(task, s, hw))

    def smem_bytes(self, task: AnyTask, s: Mapping[str, int]) -> int:
        """Shared memory one program of schedule ``s`` takes."""
        return 0

    def launch_cost(self) -> dict[str, Any]:
        """How the runtime counts a launch's bytes and FLOPs (written into the manifest):
        ``kv``: KV-cache positions read ("context") or written ("seq"); ``per_row``: inputs read a
        row per output row (a gather) and outputs counted twice; ``flops``: "none", "largest_weight" (2 x rows x
        the largest weight), "largest_int4_weight" (the same, its weight packed two to a byte),
        "largest_fp8_weight" (the same, a byte a weight),
        "two_largest_weights" (2 x rows x the two largest weights) or
        "queries_by_context" (4 x q x context, plus 2 x rows x a projection's weight)."""
        return {"kv": "seq", "per_row": False, "flops": "none"}

    # --- IR -----------------------------------------------------------------------------------
    def passes(self) -> tuple[type[ModulePass], ...]:
        return ()


def pow2(v: object) -> bool:
    """A positive power of two (and not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def check_warps_stages(s: Any, max_stages: int = 8) -> None:
    """The rules every schedule shares: 1, 2, 4, 8 or 16 warps; 1 to ``max_stages`` stages."""
    if s.num_warps not in (1, 2, 4, 8, 16):
        raise ScheduleError(f"num_warps must be 1, 2, 4, 8 or 16: {s}")
    if not (isinstance(s.num_stages, int) and not isinstance(s.num_stages, bool) and 1 <= s.num_stages <= max_stages):
        raise ScheduleError(f"num_stages must be 1..{max_stages}: {s}")
