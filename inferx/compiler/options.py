"""What a compile is asked for: the target and the options every phase reads (one frozen object,
passed down), and the error a refused model or option raises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferx.compiler.database import DEFAULT_ROOT

TARGETS = {"h200": "sm_90", "h100": "sm_90", "sm_90": "sm_90", "cpu": "cpu"}
DEFAULT_MAX_SEQ_LEN = 2048


class CompileError(ValueError):
    """A model or option the compiler refuses; the message names what is at fault."""


@dataclass(frozen=True)
class CompileOptions:
    target: str = "h200"
    dtype: str | None = None
    # The longest context a sequence may reach; None: the smaller of DEFAULT_MAX_SEQ_LEN and the
    # model's context (compile_model resolves it after import: every phase after reads an int).
    max_seq_len: int | None = None
    max_batch: int = 8
    dump_ir: Path | None = None
    progress: Callable[[str], None] | None = None
    jobs: int = 2
    # Generate the schedules of this target instead of the artifact's own: "sm_90" on a "cpu"
    # artifact runs the GPU schedules in Triton's interpreter (how tests check them without a GPU).
    schedules: str | None = None
    # The tuning database's root (records under <root>/<target>/); None: every schedule heuristic.
    tuning_logs: Path | None = DEFAULT_ROOT
    # The artifact asks CUDA sessions to launch with programmatic dependent launch (every GPU kernel
    # waits for the one before it either way) unless told otherwise: overlapping each kernel's launch
    # with the end of the one before makes decode steps faster on Hopper (docs/performance.md).
    pdl: bool = True
    # Decode GEMVs load their first weight tiles before their grid wait and release the next kernel
    # right after it, so under PDL the next kernel's weights stream while this one ends. Off: on
    # Hopper it gains nothing beyond run-to-run spread on larger models and slows smaller ones
    # (docs/performance.md).
    overlap: bool = False
    # A decode layer's MLP (gate|up GEMV, down GEMV) as one kernel (fuse-decode-mlp, the mlp
    # template; tuned by ``inferx tune --fuse-mlp``), for decode buckets of up to 8 rows. Off:
    # slower than the two kernels on Hopper (docs/performance.md).
    fuse_mlp: bool = False
    # A decode layer's attention and o projection as one kernel (fuse-decode-attention-o, the
    # attention_o template: no split of the context; tuned by ``inferx tune --fuse-attention-o``),
    # for decode buckets of up to 8 rows. Off: slower than the two kernels on Hopper (docs/performance.md).
    fuse_attention_o: bool = False


def batch_buckets(options: CompileOptions) -> list[int]:
    """The batch buckets a compile plans and generates decode kernels for."""
    return sorted({b for b in (1, 4, 16, 64) if b < options.max_batch} | {options.max_batch})


def resolved_max_seq_len(options: CompileOptions) -> int:
    """``options.max_seq_len`` once ``compile_model`` has resolved it from the model's context: the
    phases after import read it through here."""
    if options.max_seq_len is None:
        raise TypeError("max_seq_len is read before compile_model resolved it from the model's context")
    return options.max_seq_len
