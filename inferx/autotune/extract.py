"""Task extraction: the distinct tuning tasks of a model, each with the weight the task scheduler
gives it.

Runs the compile pipeline's IR phases up to fuse (``inferx.compiler.pipeline``: the kernels the
codegen phase generates) and asks ``schedules.select_schedule`` for each kernel's task, so a task
here is exactly the key the compiler will look up in the tuning database (decode at each batch
bucket asked for, prefill GEMMs at short prompts and at ``max_seq_len``, prefill attention at
``max_seq_len``; attention at the context of ``max_seq_len``). Kernels of tunable families have
tasks; the others (families with no schedule) are counted, not tuned.

A task's weight is its expected time per token: launches per token (launches per call of its
entry point divided by the tokens that call processes: 1 for a batch-1 decode step, the row
bucket of ``max_seq_len`` for a prefill, where the task is keyed and measured) times its floor:
its roofline time (``cost_model.bound_ms``) plus the fixed cost of a launch (``Hopper.launch_s``),
which no schedule removes and which outweighs the roofline of a small kernel (a decode attention
at 512 positions: a fraction of a microsecond of bytes, several microseconds a launch).
``share`` is the weight over the sum of all weights: the fraction of a token's time the task is expected to take.
A decode token and a prompt token count alike. The trivial weighting, "launches", uses launches
per token alone.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp

from inferx.autotune.cost_model import bound_ms
from inferx.compiler.families.common.hardware import H200, Hopper
from inferx.compiler.families.interface import AnyTask
from inferx.compiler.ir.ops_kernel import KernelOp

# Entry points that are another way through an entry's kernels: their tasks not counted again.
ALTERNATES = ("prefill_last",)
# The compiler driver's phases 2-4, whose kernels phase 7 generates (see inferx.compiler.driver).
WEIGHTINGS = ("roofline", "launches")


@dataclass(frozen=True)
class TuningTask:
    """One task of a model: a representative kernel (what a runner builds), where it runs and
    how often. ``share`` is filled in by ``extract_tasks``."""

    task: AnyTask
    kernel: KernelOp | None = field(repr=False, compare=False)
    entry: str
    launches: int
    tokens: int
    roofline_ms: float
    weighting: str = "roofline"
    share: float = 0.0
    launch_ms: float = 0.0  # the fixed cost of one launch (``Hopper.launch_s``)

    @property
    def floor_ms(self) -> float:
        """The least one launch can take: its roofline plus the fixed cost of a launch."""
        return self.roofline_ms + self.launch_ms

    @property
    def launches_per_token(self) -> float:
        return self.launches / self.tokens

    @property
    def weight(self) -> float:
        """Expected ms per token at the floor ("roofline"), or launches per token ("launches")."""
        if self.weighting == "launches":
            return self.launches_per_token
        return self.launches_per_token * self.floor_ms


@dataclass(frozen=True)
class Extraction:
    """The tasks, heaviest first, and the kernels that have none (count per reason)."""

    tasks: tuple[TuningTask, ...]
    untuned: dict[str, int]

    def summary(self) -> str:
        lines = [f"{len(self.tasks)} tuning tasks"]
        lines += [f"  {t.share:6.1%}  x{t.launches:<3d} {t.task}" for t in self.tasks]
        lines += [f"  not tuned: {n} kernels ({why})" for why, n in sorted(self.untuned.items())]
        return "\n".join(lines)


def fused_module(src: Any, dtype: str | None = None, fuse_mlp: bool = False,
                 fuse_attention_o: bool = False, quant: str | None = None, quant_head: bool = False,
                 fp8_decode_min_batch: int | None = None, kv_block_size: int | None = None,
                 max_seq_len: int = 2048, max_batch: int = 1) -> ModuleOp:
    """The module after the driver's phases 1-4 (with ``fuse_mlp``, ``fuse_attention_o`` and
    ``fp8_decode_min_batch``, the kernels the compiler's options of those names make; with
    ``quant``, its linears made ``ix.qlinear`` under that scheme (``ix.fp8_linear`` for "fp8")
    first, the LM head too with ``quant_head``: the quantize pass alone, since tasks need shapes,
    not weights; with ``kv_block_size``, its KV cache paged as the compiler pages it for
    ``max_seq_len`` and ``max_batch``). ``src`` is an
    ix module or Program (cloned, never changed), an HF model directory (read from its
    config.json alone), or anything ``inferx.compile`` imports."""
    from inferx.compiler.frontend.hf import with_dtype
    from inferx.compiler.pipeline import phases, registry
    from inferx.models.decoder import build_decoder_module
    from inferx.models.registry import decoder_config
    from inferx.passes.pipeline import PassManager, parse
    from inferx.program import Program

    if isinstance(src, ModuleOp):
        module = src.clone()
    elif isinstance(src, Program):
        module = src.module.clone()
    elif isinstance(src, (str, Path)) and Path(src, "config.json").is_file():
        config = Path(src, "config.json")
        raw = json.loads(config.read_text())
        module = build_decoder_module(with_dtype(decoder_config(raw, str(config)), _ir_dtype(dtype)))
    else:
        from inferx.compiler.options import CompileOptions
        from inferx.compiler.pipeline import import_program

        module = import_program(src, CompileOptions(dtype=dtype)).module
    from inferx.compiler.options import CompileOptions

    if quant is not None:
        from inferx.passes.dce import DCE
        from inferx.passes.quantize import Quantize
        from inferx.passes.quantize_fp8 import QuantizeFp8

        quantize = QuantizeFp8(head=quant_head) if quant == "fp8" else Quantize(scheme=quant, head=quant_head)
        PassManager([quantize, DCE()]).run(module)
    if kv_block_size is not None:
        from inferx.compiler.paging import paging_for
        from inferx.passes.page_kv import PageKV

        p = paging_for(kv_block_size, None, max_seq_len, max_batch)
        PassManager([PageKV(p.block_size, p.blocks, p.blocks_per_seq)]).run(module)
    options = CompileOptions(fuse_mlp=fuse_mlp, fuse_attention_o=fuse_attention_o,
                             fp8_decode_min_batch=fp8_decode_min_batch)
    spec = ",".join(p for name, p in phases(options) if name != "plan-memory")
    PassManager(parse(spec, registry())).run(module)
    return module


def extract_tasks(module: ModuleOp, max_seq_len: int = 2048, hw: Hopper = H200,
                  weighting: str = "roofline", batches: tuple[int, ...] = (1,)) -> Extraction:
    """The distinct tuning tasks of a fused module (``fused_module``), heaviest first. A kernel
    gives one task per row bucket the compiler generates it for on GPU targets
    (``driver.kernel_row_buckets``): a decode GEMM or decode attention each batch bucket in
    ``batches``, a prefill GEMM short prompts and ``max_seq_len``."""
    from inferx.compiler.families.interface import TaskError
    from inferx.compiler.schedules import kernel_row_buckets, select_schedule

    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {weighting!r}: {', '.join(WEIGHTINGS)}")
    found: dict[str, TuningTask] = {}
    untuned: Counter[str] = Counter()
    # prefill_last is a prompt's other way through (prefill's layers, decode's LM head): it adds
    # only tasks no other entry has (none for the decoder families), not launches to theirs
    funcs = sorted((op for op in module.ops if isinstance(op, FuncOp)), key=lambda f: f.sym_name.data in ALTERNATES)
    known: set[str] = set()
    for func in funcs:
        entry = func.sym_name.data
        if entry in ALTERNATES:
            known = set(found)
        for kop in (op for op in func.body.block.ops if isinstance(op, KernelOp)):
            try:
                buckets = kernel_row_buckets(kop, batches, max_seq_len)
            except TaskError:  # select_schedule says why the kernel has no task
                buckets = [None]
            for rows in buckets:
                choice = select_schedule(kop, None, max_seq_len, rows)
                if choice.task is None:
                    untuned[f"{kop.template.data}: {choice.reason}"] += 1
                    continue
                key = choice.task.key
                if key in known:
                    continue
                if key in found:
                    found[key] = replace(found[key], launches=found[key].launches + 1)
                else:
                    # Tokens per launch: the row bucket the task is keyed (and measured) at.
                    found[key] = TuningTask(choice.task, kop, entry, 1, choice.task.rows,
                                            bound_ms(choice.task, hw), weighting, launch_ms=hw.launch_s * 1e3)
    total = sum(t.weight for t in found.values()) or 1.0
    tasks = sorted((replace(t, share=t.weight / total) for t in found.values()), key=lambda t: (-t.weight, t.task.key))
    return Extraction(tuple(tasks), dict(untuned))


def _ir_dtype(dtype: str | None) -> str | None:
    return {"fp32": "f32", "fp16": "f16", "bf16": "bf16", None: None}.get(dtype, dtype)


def heuristic_baseline(tt: TuningTask) -> dict[str, int] | None:
    """The schedule the compiler uses for ``tt`` when the database has no record (the template's
    heuristic at the task's rows), as a schedule dict; None without a kernel."""
    from inferx.compiler.codegen import heuristic_schedule

    sched = heuristic_schedule(tt.kernel, "sm_90", tt.task.rows) if tt.kernel is not None else None
    return sched.to_dict() if sched is not None else None
