"""The compiler driver: a model in, an artifact out, as a flat list of numbered phases.

    1. import          the frontend builds the ix module and the weight store
    2. cleanup         canonicalize, cse, dce
    3. merge-gemms     q/k/v and gate/up become one GEMM each (weights concatenated), gate|up
                       with its rows interleaved (interleave-pairs); RMSNorm scales move into
                       the weights of the GEMMs they feed (fold-norm-weights)
    4. fuse            every run-time op into an ix.kernel (5 per decoder layer; in decode one
                       fewer with ``fuse_mlp`` (the MLP) and with ``fuse_attention_o``)
    5. plan-memory     one arena per shape bucket
    6. fold weights    weight-only values (concatenations) become stored weights
    7. codegen         Triton source per kernel, identical kernels shared across layers; each GEMM
                       and attention kernel on the fastest schedule the tuning database has for
                       its task, else on the template's heuristic (counted and listed as a fallback)
    8. build           cubins for sm_90 targets (in worker processes); CPU keeps the source
    9. launch plan     per entry point: kernels, grids, argument bindings
   10. write           the artifact, under a temporary name, then renamed into place; the
                       program's tokenizer, where it has one, goes under ``tokenizer/``

``--dump-ir DIR`` writes the IR after phases 1-5. Each phase reports progress through
``options.progress``.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import BlockArgument, Operation, SSAValue

from inferx.autotune.database import DEFAULT_ROOT, NO_DATABASE, SCHEDULE_FORMS, Database, Record
from inferx.autotune.space import space_for
from inferx.autotune.task import (
    AnyTask,
    AttentionTask,
    Task,
    TaskError,
    attention_o_task,
    attention_task,
    gemm_task,
    mlp_task,
    rows_bucket,
    shape_of,
)
from inferx.compiler.codegen import attention, gemm, generate, heuristic_schedule
from inferx.compiler.codegen.gemm import GEMV_MAX_ROWS
from inferx.compiler.codegen.tile import dim_code
from inferx.compiler.interpreter.context import KernelContext
from inferx.compiler.interpreter.kernels import KERNELS
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir.ops_base import get_int, get_str
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.ops_nn import ROPE_SCALINGS, RopeOp
from inferx.compiler.ir.ops_tensor import WeightOp
from inferx.compiler.ir.types import DType, TensorType
from inferx.passes import registry
from inferx.passes.pipeline import PassManager, parse
from inferx.passes.plan_memory import read_plan
from inferx.program import Program
from inferx.runtime.kernel_source import KernelSource

TARGETS = {"h200": "sm_90", "h100": "sm_90", "sm_90": "sm_90", "cpu": "cpu"}
FORMAT_NOTE = "weights are stored little-endian in the kernel dtype; bf16 as its 16 raw bits"


class CompileError(ValueError):
    """A model or option the compiler refuses; the message names what is at fault."""


@dataclass(frozen=True)
class CompileOptions:
    target: str = "h200"
    dtype: str | None = None
    max_seq_len: int = 2048
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


def compile_model(src: Any, output: Path | str, options: CompileOptions) -> Path:
    """Compiles ``src`` (a path, a transformers model or a Program) into an artifact at ``output``."""
    from inferx.runtime.artifact_write import write_artifact

    if options.target not in TARGETS:
        raise CompileError(f"unknown target {options.target!r}; the targets are {', '.join(TARGETS)}")
    if options.max_batch < 1 or options.max_seq_len < 1:
        raise CompileError("max_batch and max_seq_len must be positive")
    for flag, on in (("fuse_mlp", options.fuse_mlp), ("fuse_attention_o", options.fuse_attention_o)):
        if on and options.max_batch > GEMV_MAX_ROWS:
            raise CompileError(f"{flag}: the fused decode kernel runs at most {GEMV_MAX_ROWS} rows per step "
                               f"(max_batch {options.max_batch})")
    say = options.progress or (lambda msg: None)
    clock = time.perf_counter()

    def phase(n: int, what: str) -> None:
        say(f"[{n:2d}/10] {what} ({time.perf_counter() - clock:.1f} s)")

    phase(1, "import")
    # The passes rewrite the module in place: never the caller's Program.
    program = replace(src, module=src.module.clone()) if isinstance(src, Program) else _import(src, options)
    if program.info is None:
        raise CompileError("only decoder LLMs (prefill/decode entry points) compile to artifacts for now")
    info = program.info
    if options.max_seq_len > info.max_context:
        raise CompileError(f"max_seq_len {options.max_seq_len} exceeds the model's {info.max_context}")
    if options.target == "cpu" and info.dtype == "bf16":
        raise CompileError(
            "--target cpu runs kernels in Triton's interpreter, where bf16 is wrong: use --dtype fp32 or fp16"
        )
    _dump(options, "1-import", program)
    for n, name, pipeline in (
        (2, "cleanup", "canonicalize,cse,dce"),
        (3, "merge-gemms", "merge-gemms,interleave-pairs,fold-norm-weights,dce"),
        (4, "fuse", "fuse,norm-stats" + (",fuse-decode-mlp" if options.fuse_mlp else "")
         + (",fuse-decode-attention-o" if options.fuse_attention_o else "")),
        (5, "plan-memory", _plan_pipeline(options)),
    ):
        phase(n, name)
        PassManager(parse(pipeline, registry())).run(program.module)
        _dump(options, f"{n}-{name}", program)
        if n == 4:
            _check_fused(program, options)
    funcs = {f.sym_name.data: f for f in program.module.ops if isinstance(f, FuncOp)}

    phase(6, "fold weights")
    weights = _WeightFolder(program)
    phase(7, "codegen")
    target = TARGETS[options.target]
    sched_target = TARGETS[options.schedules] if options.schedules else target
    _settle_dynamic_rope(program, options)
    db = tuning_database(options, say)
    kernels: dict[str, KernelSource] = {}
    choices: dict[str, ScheduleChoice] = {}
    # a kernel's own record's time at each row bucket it serves (None where it borrowed one):
    # buckets whose schedules agree share one kernel, whose records differ by rows
    bucket_ms: dict[str, dict[int, float | None]] = {}
    per_func_kernels: dict[str, list[tuple[KernelOp, str]]] = {}
    variants: dict[KernelOp, list[tuple[int, str]]] = {}
    for fname, func in funcs.items():
        named: list[tuple[KernelOp, str]] = []
        for kop in [o for o in func.body.block.ops if isinstance(o, KernelOp)]:
            for rows in _row_buckets(kop, options):
                choice = select_schedule(kop, db, options.max_seq_len, rows)
                ks = _generate(kop, "kernel", choice, sched_target, target, rows, options.overlap)
                name = _kernel_name(kop.template.data, ks, kernels)
                if name not in kernels:
                    kernels[name] = _generate(kop, name, choice, sched_target, target, rows, options.overlap)
                    choices[name] = choice
                bound = rows if rows is not None else options.max_batch * options.max_seq_len
                variants.setdefault(kop, []).append((bound, name))
                if choice.record is not None:
                    bucket_ms.setdefault(name, {})[bound] = (choice.record.median_ms if choice.from_rows is None
                                                             else None)
            named.append((kop, variants[kop][0][1]))
        per_func_kernels[fname] = named
    say(f"        {sum(len(v) for v in per_func_kernels.values())} launches, {len(kernels)} distinct kernels")
    say(f"        {_tuning_line(choices)}")

    phase(8, f"build ({target})")
    binaries = _build(kernels, target, options.jobs, say) if target != "cpu" else {}

    phase(9, "launch plan")
    entries = {fname: _entry_plan(func, per_func_kernels[fname], weights, variants) for fname, func in funcs.items()}

    phase(10, "write")
    files: dict[str, Any] = {}
    weight_index = {}
    for name, arr in weights.stored.items():
        fname = f"weights/{_safe(name)}.bin"
        files[fname] = _weight_bytes(arr, weights.dtypes[name])
        weight_index[name] = {"file": fname, "shape": list(arr.shape), "dtype": weights.dtypes[name]}
    kernel_index = {}
    for name, ks in sorted(kernels.items()):
        files[f"kernels/{name}.py"] = ks.source.encode()
        meta = ks.to_json()
        del meta["source"]
        meta["file"] = f"kernels/{name}.py"
        if name in binaries:
            files[f"kernels/{name}.cubin"] = binaries[name]["cubin"]
            meta["cubin"] = f"kernels/{name}.cubin"
            for key in ("shared", "extra_params", "global_scratch", "global_scratch_align", "launch_warps"):
                meta[key] = binaries[name][key]
        kernel_index[name] = meta
    tokenizer_files = _tokenizer_files(program, say)
    files.update(tokenizer_files)
    sections = {
        "compiler_version": _version("inferx"),
        "triton_version": _version("triton"),
        "target": target,
        "model": {
            "architecture": info.architecture, "vocab_size": info.vocab_size,
            "max_context": info.max_context, "eos_token_ids": list(info.eos_token_ids),
            "num_layers": info.num_layers, "num_kv_heads": info.num_kv_heads,
            "head_dim": info.head_dim, "dtype": info.dtype,
        },
        "limits": {"max_batch": options.max_batch, "max_seq_len": options.max_seq_len},
        "launch": {"pdl": bool(options.pdl and target != "cpu"), "overlap": options.overlap},
        "entries": entries,
        "kernels": kernel_index,
        "weights": weight_index,
        "memory_plan": {fname: _plan_json(func) for fname, func in funcs.items()},
        "schedules": _schedules_json(choices, db, options, bucket_ms),
        "weights_format": FORMAT_NOTE,
        "tokenizer": {"files": sorted(tokenizer_files)},
    }
    out = write_artifact(Path(output), sections, files)
    phase(10, f"wrote {out}")
    return out


@dataclass(frozen=True)
class ScheduleChoice:
    """Where one kernel's schedule comes from: a tuning record of its task (``schedule`` and
    ``record`` set, origin "tuned"), a record of the same task at another long-prompt row bucket
    (origin "borrowed", measured at ``from_rows``; ``reason`` says so), or the template's
    heuristic (origin "heuristic"; ``reason`` says why)."""

    schedule: Any | None
    task: AnyTask | None
    record: Record | None
    reason: str = ""
    from_rows: int | None = None

    @property
    def origin(self) -> str:
        if self.schedule is None:
            return "heuristic"
        return "tuned" if self.from_rows is None else "borrowed"


def tuning_database(options: CompileOptions, say: Callable[[str], None] = lambda msg: None) -> Database | None:
    """The records for the target whose schedules are generated (``options.schedules`` or the
    target); None for the cpu target (GPU timings say nothing about Triton's interpreter) and when
    ``options.tuning_logs`` is None. Unreadable lines are reported through ``say`` and skipped."""
    target = options.schedules or options.target
    if options.tuning_logs is None or target in NO_DATABASE:
        return None
    db = Database.load(options.tuning_logs, target)
    for problem in db.problems:
        say(f"        tuning database: skipped {problem}")
    return db


def _row_buckets(kop: KernelOp, options: CompileOptions) -> list[int | None]:
    """The row buckets a kernel is generated for on a GPU target (``kernel_row_buckets``); [None]
    (one kernel for every shape) for the cpu target."""
    if (options.schedules or options.target) == "cpu":
        return [None]
    return kernel_row_buckets(kop, _batch_buckets(options), options.max_seq_len)


def kernel_row_buckets(kop: KernelOp, batches: Sequence[int], max_seq_len: int) -> list[int | None]:
    """The row buckets a kernel is generated for, each with its own schedule; the launch plan
    picks by rows (batch x seq). A decode GEMM or decode attention: each batch bucket (one row
    streams weights best as a GEMV, many rows want the dot path; split-KV attention wants fewer
    context slices as the batch fills the chip). A prefill GEMM: prompts of up to each of
    ``gemm.PREFILL_ROW_BUCKETS`` rows below ``max_seq_len``'s bucket (tiles that fill the SMs at
    few rows) and None (any longer prompt, keyed at ``max_seq_len``). Anything else:
    [None]. Buckets whose schedules agree generate the same source, so they share one kernel and
    the launch lists no variants."""
    if _decode_kernel(kop):
        return list(batches)
    if kop.template.data == "gemm" and gemm.applies(kop) is None:
        return [b for b in gemm.PREFILL_ROW_BUCKETS if b < rows_bucket(max_seq_len)] + [None]
    return [None]


def _decode_kernel(kop: KernelOp) -> bool:
    """A decode GEMM (rows without ``seq``), a fused decode kernel, or decode attention (one query
    per sequence)."""
    template = kop.template.data
    if template == "gemm":
        return shape_of(kop) == "decode"
    if template in ("mlp", "attention_o"):
        return True
    return template == "attention" and attention.applies(kop) is None and attention.is_decode(kop)


def select_schedule(kop: KernelOp, db: Database | None, max_seq_len: int, rows: int | None = None) -> ScheduleChoice:
    """The schedule of one kernel: the database's best record of its task, else the heuristic.

    The task is looked up at the rows the kernel is generated for (``rows``: a decode batch
    bucket), else at the bucket that is compiled for: a decode step at batch 1, a prefill of a
    ``max_seq_len`` prompt. Attention tasks are keyed by the context of ``max_seq_len`` too."""
    template = kop.template.data
    if template not in SCHEDULE_FORMS:
        return ScheduleChoice(None, None, None, f"template {template} is not tuned")
    try:
        decode = _decode_kernel(kop)
        at = rows if rows is not None else 1 if decode else max_seq_len
        task: AnyTask = (attention_task(kop, at, max_seq_len) if template == "attention"
                         else attention_o_task(kop, at, max_seq_len) if template == "attention_o"
                         else mlp_task(kop, at) if template == "mlp" else gemm_task(kop, at))
    except TaskError as e:
        return ScheduleChoice(None, None, None, f"no task: {e}")
    if db is None:
        return ScheduleChoice(None, task, None, "no tuning database for this target")
    best = db.best(task)
    if best is not None:
        return ScheduleChoice(best[0], task, best[1])
    near = nearest_bucket_record(task, db)
    if near is None:
        return ScheduleChoice(None, task, None, "no record")
    schedule, record, from_rows = near
    return ScheduleChoice(schedule, task, record, f"no record at {task.rows} rows; the {from_rows}-row bucket's",
                          from_rows)


# A long prompt's row buckets (above the short-prompt ones, ``gemm.PREFILL_ROW_BUCKETS``) borrow a
# neighbour's record when they have none: the factors tried, nearest first.
BORROW_MIN_ROWS = 1024
BORROW_FACTORS = (2.0, 0.5, 4.0, 0.25, 8.0, 0.125)


def nearest_bucket_record(task: AnyTask, db: Database) -> tuple[Any, Record, int] | None:
    """(schedule, record, its rows) of the best record of ``task`` at the nearest other row bucket
    of 1024 rows or more, valid in the task's schedule space, or None. Only prefill GEMM and
    attention tasks of 1024 rows or more borrow: a long prompt's tiles are a matter of filling the
    SMs many times over, which a schedule measured at twice or half the rows does too, better than
    an untuned heuristic; a short prompt's tiling and a decode batch's are questions of their own.
    An attention task tries its neighbour with the context scaled alike, then with its own."""
    if not isinstance(task, Task | AttentionTask) or task.shape != "prefill" or task.rows < BORROW_MIN_ROWS:
        return None
    space = space_for(task.template, db.target)
    for factor in BORROW_FACTORS:
        rows = int(task.rows * factor)
        if rows < BORROW_MIN_ROWS:
            continue
        near: list[AnyTask] = [replace(task, rows=rows)]
        if isinstance(task, AttentionTask):
            near.insert(0, replace(task, rows=rows, ctx=max(1, int(task.ctx * factor))))
        for other in near:
            best = db.best(other)
            if best is not None and space.why_invalid(task, space.complete(best[1].schedule)) is None:
                return best[0], best[1], rows
    return None


def _generate(kop: KernelOp, name: str, choice: ScheduleChoice, sched_target: str, target: str,
              rows: int | None = None, overlap: bool = False) -> KernelSource:
    schedule = choice.schedule or heuristic_schedule(kop, sched_target, rows)
    ks = generate(kop, name, sched_target, schedule, grid_dependency=target != "cpu", overlap=overlap)
    return ks if choice.schedule is None else replace(ks, schedule_origin=choice.origin)


def _kernel_name(template: str, ks: KernelSource, kernels: Mapping[str, KernelSource]) -> str:
    """A kernel's name: its template and a digest of its source. When a kernel of that name
    launches differently (other constexprs, warps, stages, grid or scratch: schedules that change
    no line of source, such as decode attention's SPLITS), a digest of how it launches is
    appended, so two schedules never share a name."""
    name = f"{template}_{hashlib.sha256(ks.source.encode()).hexdigest()[:12]}"
    first = kernels.get(name)
    if first is None or _launch_shape(first) == _launch_shape(ks):
        return name
    return f"{name}_{hashlib.sha256(json.dumps(_launch_shape(ks), sort_keys=True).encode()).hexdigest()[:8]}"


def _launch_shape(ks: KernelSource) -> dict[str, Any]:
    d = ks.to_json()
    return {k: d[k] for k in ("constexprs", "num_warps", "num_stages", "grid", "scratch")}


def _tuning_line(choices: Mapping[str, ScheduleChoice]) -> str:
    """``tuned N of M kernels[; B on a record of another row bucket]; fallbacks: <count> <reason>, ...``"""
    tuned = sum(c.origin == "tuned" for c in choices.values())
    borrowed = sum(c.origin == "borrowed" for c in choices.values())
    reasons: dict[str, int] = {}
    for c in choices.values():
        if c.origin == "heuristic":
            reasons[c.reason] = reasons.get(c.reason, 0) + 1
    fallbacks = ", ".join(f"{n} ({why})" for why, n in sorted(reasons.items())) or "none"
    also = f"; {borrowed} on a record of another row bucket" if borrowed else ""
    hot = sum(c.record is not None and c.record.regime == "sustained" for c in choices.values())
    also += f"; {hot} on records timed at sustained clocks" if hot else ""
    return f"tuned {tuned} of {len(choices)} kernels{also}; fallbacks: {fallbacks}"


def _schedules_json(choices: Mapping[str, ScheduleChoice], db: Database | None, options: CompileOptions,
                    bucket_ms: Mapping[str, Mapping[int, float | None]]) -> dict[str, Any]:
    """The manifest's account of schedules: each tuned kernel with its task and record (the
    first row bucket's; with ``by_rows``, each bucket's record time where the kernel serves
    several), each fallback with its task (None where the template has none) and the reason."""
    tuned, fallbacks = {}, {}
    for name, c in sorted(choices.items()):
        if c.record is not None and c.task is not None:
            by_rows = bucket_ms.get(name, {})
            tuned[name] = {"task": c.task.key, "summary": str(c.task), "schedule": c.record.schedule,
                           "median_ms": c.record.median_ms, "date": c.record.date, "source": c.record.source,
                           **({"from_rows": c.from_rows} if c.from_rows is not None else {}),
                           **({"regime": c.record.regime} if c.record.regime else {}),
                           **({"by_rows": {str(b): ms for b, ms in sorted(by_rows.items())}}
                              if len(by_rows) > 1 else {})}
        else:
            fallbacks[name] = {"task": c.task.key if c.task else None, "reason": c.reason}
    target = options.schedules or options.target
    return {
        "database": {"target": db.target, "records": len(db.records)} if db is not None else None,
        "tuned": tuned,
        "fallbacks": fallbacks,
        "note": "" if db is not None else f"no tuning database for target {target}: every schedule is heuristic",
    }


def _tokenizer_files(program: Program, say: Callable[[str], None]) -> dict[str, bytes]:
    """The program's tokenizer as ``save_pretrained`` writes it, each file under ``tokenizer/``
    (read back with ``transformers.AutoTokenizer``); nothing, with a note, when it has none."""
    import tempfile

    if program.tokenizer is None:
        say("        no tokenizer: the artifact takes token ids only")
        return {}
    with tempfile.TemporaryDirectory(prefix="inferx-tokenizer-") as tmp:
        try:
            program.tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
        except Exception as e:  # a third-party tokenizer: name what failed, whatever it raised
            raise CompileError(f"cannot save the model's tokenizer: {type(e).__name__}: {e}") from None
        root = Path(tmp)
        found = sorted(p for p in root.rglob("*") if p.is_file())
        files = {f"tokenizer/{p.relative_to(root).as_posix()}": p.read_bytes() for p in found}
    say(f"        tokenizer: {len(files)} files")
    return files


# What each fused decode template takes, for the error when a model's layers do not fuse.
FUSED_DECODE = {
    "fuse_mlp": ("mlp", "decode MLPs", "a gated MLP with an RMSNorm prologue, no biases and weights stored [N, K] "
                 "(inferx/compiler/codegen/mlp.py)"),
    "fuse_attention_o": ("attention_o", "decode attentions", "heads joined by transpose and reshape into a "
                         "projection with no bias stored [N, K] (inferx/compiler/codegen/attention_o.py)"),
}


def _check_fused(program: Program, options: CompileOptions) -> None:
    """With ``fuse_mlp`` or ``fuse_attention_o``, the decode entry must have that fused kernel for
    every decoder layer: else the model's layers are not ones the template implements, and the
    compile stops saying so."""
    info = program.info
    assert info is not None
    decode = next(f for f in program.module.ops if isinstance(f, FuncOp) and f.sym_name.data == "decode")
    for flag, (template, what, takes) in FUSED_DECODE.items():
        if not getattr(options, flag):
            continue
        fused = sum(1 for o in decode.body.block.ops if isinstance(o, KernelOp) and o.template.data == template)
        if fused != info.num_layers:
            raise CompileError(f"{flag}: {fused} of the {info.num_layers} {what} fused; the {template} template "
                               f"takes {takes}")


def _import(src: Any, options: CompileOptions) -> Program:
    from inferx.compiler.frontend import import_model

    dtype = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", None: None}.get(options.dtype, options.dtype)
    return import_model(src, **({"dtype": dtype} if dtype else {}))


def _batch_buckets(options: CompileOptions) -> list[int]:
    return sorted({b for b in (1, 4, 16, 64) if b < options.max_batch} | {options.max_batch})


def _plan_pipeline(options: CompileOptions) -> str:
    batch = _batch_buckets(options)
    seq = sorted({s for s in (1, 512, 2048) if s < options.max_seq_len} | {options.max_seq_len})
    return (f"plan-memory{{batch={','.join(map(str, batch))} seq={','.join(map(str, seq))} "
            f"max-ctx={options.max_seq_len}}}")


def _settle_dynamic_rope(program: Program, options: CompileOptions) -> None:
    """Dynamic NTK RoPE raises theta only once a position reaches ``original_max_position``;
    sessions keep positions below ``max_seq_len``, so up to that length it is plain RoPE."""
    for op in program.module.walk():
        if isinstance(op, RopeOp) and get_str(op.attributes, "scaling", ROPE_SCALINGS, "none") == "dynamic":
            original = get_int(op.attributes, "original_max_position")
            if options.max_seq_len > original:
                raise CompileError(
                    f"dynamic NTK RoPE is not generated past original_max_position {original}: "
                    f"use max_seq_len <= {original} (got {options.max_seq_len})"
                )
            op.attributes["scaling"] = StringAttr("none")


def _dump(options: CompileOptions, name: str, program: Program) -> None:
    if options.dump_ir is not None:
        options.dump_ir.mkdir(parents=True, exist_ok=True)
        (options.dump_ir / f"{name}.mlir").write_text(str(program.module) + "\n")


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)


def _version(pkg: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return "unknown"


def _weight_bytes(arr: np.ndarray, dtype: str) -> np.ndarray:
    """A weight as stored: little-endian, bf16 as the top 16 bits of its fp32 value rounded to
    nearest even. Converted in chunks of 16M values, so an 8B model's weights pass through memory
    once instead of as several full-size temporaries."""
    if dtype != "bf16":
        return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False)
    import torch  # its float -> bf16 cast rounds to nearest even, vectorized and threaded

    flat = np.ascontiguousarray(arr).reshape(-1)
    out = np.empty(flat.size, dtype="<u2")
    step = 1 << 24
    for i in range(0, flat.size, step):
        with warnings.catch_warnings():  # a read-only memory map; the tensor is only read
            warnings.filterwarnings("ignore", message=".*not writable")
            chunk = torch.from_numpy(flat[i : i + step].astype(np.float32, copy=False))
        out[i : i + step] = chunk.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    return out.reshape(arr.shape)


class _WeightFolder:
    """Evaluates the weight-only values kernels read, and names them: a leaf keeps its weight's
    name; a derived value is named by the hash of how it is computed, so prefill and decode share
    it and compiling twice gives the same names. Only values a kernel reads are kept (and
    written): what they are computed from (the q, k and v weights of a concatenation, the
    concatenation a norm scale multiplies) is evaluated when needed and let go."""

    def __init__(self, program: Program):
        self.program = program
        self.stored: dict[str, np.ndarray] = {}
        self.dtypes: dict[str, str] = {}
        self._names: dict[SSAValue, str] = {}

    def name_of(self, v: SSAValue) -> str:
        """The stored name of ``v``, a value a kernel reads (evaluated and kept on first use)."""
        name = self._name(v)
        if name not in self.stored:
            self.stored[name] = self._value(v)
            self.dtypes[name] = v.type.dtype.value  # type: ignore[attr-defined]
        return name

    def _name(self, v: SSAValue) -> str:
        if v not in self._names:
            owner = v.owner
            assert isinstance(owner, Operation)
            if isinstance(owner, WeightOp):
                self._names[v] = owner.attributes["name"].data  # type: ignore[attr-defined]
            else:
                self._names[v] = "derived." + hashlib.sha256(_recipe(owner, self).encode()).hexdigest()[:16]
        return self._names[v]

    def _value(self, v: SSAValue) -> np.ndarray:
        name = self._name(v)
        if name in self.stored:
            return self.stored[name]
        owner = v.owner
        ty = v.type
        assert isinstance(owner, Operation) and isinstance(ty, TensorType)
        if isinstance(owner, WeightOp):
            return self._storage(np.asarray(self.program.weights[name]), ty.dtype)
        ins = [self._value(x) for x in owner.operands]
        narrow = _narrow_binary(owner, ins, ty.dtype)
        if narrow is not None:
            return narrow
        outs = KERNELS[type(owner)](owner, ins, KernelContext(env={}, weights={}))
        results: list[SSAValue] = list(owner.results)
        return self._storage(np.asarray(outs[results.index(v)]), ty.dtype)

    @staticmethod
    def _storage(a: np.ndarray, dtype: DType) -> np.ndarray:
        want = {DType.f32: np.float32, DType.bf16: np.float32, DType.f16: np.float16, DType.i32: np.int32,
                DType.i64: np.int64, DType.i8: np.int8}.get(dtype)
        if want is None:
            raise CompileError(f"weights of dtype {dtype.value} are not stored yet")
        return np.ascontiguousarray(a, dtype=want)


_NARROW_BINARY: dict[type, Callable[..., np.ndarray]] = {ts.MulOp: np.multiply, ts.AddOp: np.add}


def _narrow_binary(op: Operation, ins: list[np.ndarray], dtype: DType) -> np.ndarray | None:
    """A weight-only product or sum (a norm scale folded into a GEMM weight) in float32, an
    8B model's folds taking seconds instead of minutes in the interpreter's float64. The same
    values once stored: a product or sum of two bf16 or fp16 values is exact in float32, and of
    two float32 values float32 rounds once, as float64 then float32 does. None for other ops."""
    fn = _NARROW_BINARY.get(type(op))
    if fn is None or dtype not in (DType.f32, DType.bf16):
        return None
    a, b = ins
    if a.dtype != np.float32 or b.dtype != np.float32:
        return None
    return np.ascontiguousarray(fn(a, b, dtype=np.float32))


def _recipe(op: Operation, folder: _WeightFolder) -> str:
    attrs = ",".join(f"{k}={v}" for k, v in sorted(op.attributes.items()))
    args = ",".join(folder._name(v) for v in op.operands)
    types = ",".join(str(r.type) for r in op.results)
    return f"{op.name}[{attrs}]({args})->{types}"


def _binding(v: SSAValue, buffers: dict[SSAValue, str], weights: _WeightFolder) -> dict[str, Any]:
    if isinstance(v, BlockArgument):
        return {"kind": "arg", "index": v.index}
    if v in buffers:
        return {"kind": "buffer", "name": buffers[v]}
    return {"kind": "weight", "name": weights.name_of(v)}


def _entry_plan(func: FuncOp, kernels: list[tuple[KernelOp, str]], weights: _WeightFolder,
                variants: Mapping[KernelOp, list[tuple[int, str]]]) -> dict[str, Any]:
    """The launch plan of one entry. A launch whose kernel has per-bucket variants lists them as
    ``by_rows``: [[rows, kernel], ...] ascending, rows counting batch x seq (a prompt's tokens),
    or batch where the launch says ``"rows": "batch"`` (a decode kernel); a runtime takes the
    first bucket that holds its rows, else the last (``kernel`` is the first's)."""
    buffers: dict[SSAValue, str] = {}
    buffer_types: dict[str, dict[str, Any]] = {}
    launches = []
    for kop, name in kernels:
        ins = [_binding(v, buffers, weights) for v in kop.operands]
        outs = []
        for i, r in enumerate(kop.results):
            bname = f"{kop.attributes['name'].data}#{i}"  # type: ignore[attr-defined]
            buffers[r] = bname
            ty = r.type
            assert isinstance(ty, TensorType)
            buffer_types[bname] = {"shape": [dim_code(d) for d in ty.shape], "dtype": ty.dtype.value}
            outs.append({"kind": "buffer", "name": bname})
        launch: dict[str, Any] = {"kernel": name, "inputs": ins, "outputs": outs}
        if len({n for _, n in variants.get(kop, [])}) > 1:
            launch["by_rows"] = [[b, n] for b, n in variants[kop]]
            if _decode_kernel(kop):  # its rows are the batch's, also in a prefill entry's tail
                launch["rows"] = "batch"
        launches.append(launch)
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    args = []
    for a in func.body.block.args:
        ty = a.type
        assert isinstance(ty, TensorType)
        args.append({"name": a.name_hint or f"arg{a.index}", "shape": [dim_code(d) for d in ty.shape],
                     "dtype": ty.dtype.value})
    return {
        "args": args,
        "launches": launches,
        "buffers": buffer_types,
        "returns": [_binding(v, buffers, weights) for v in ret.operands],
    }


def _plan_json(func: FuncOp) -> dict[str, Any]:
    plan = read_plan(func)
    if plan is None:
        return {}
    return {
        "text": str(plan.to_attr()),
        "buckets": [{"dims": dict(b.dims), "peak_bytes": b.peak, "no_reuse_bytes": b.no_reuse, "kv_bytes": b.kv}
                    for b in plan.buckets],
    }


def _build(kernels: Mapping[str, KernelSource], target: str, jobs: int,
           say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Compiles every kernel to a cubin in worker processes (Triton's interpreter mode, used by
    CPU sessions, is process-wide, so compilation never runs in the caller's process)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    arch = int(target.removeprefix("sm_"))
    out: dict[str, dict[str, Any]] = {}
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        futures = {name: pool.submit(_compile_one, json.dumps(ks.to_json()), arch) for name, ks in kernels.items()}
        for i, (name, fut) in enumerate(sorted(futures.items()), 1):
            try:
                out[name] = fut.result()
            except BrokenProcessPool:
                raise CompileError(
                    f"a kernel build worker died while building {name} for {target}. Kernels are built in "
                    "worker processes that import your __main__ module: a script that calls inferx.compile must "
                    "do so under `if __name__ == '__main__':`"
                ) from None
            except Exception as e:  # a kernel that does not compile is a compiler bug: name it
                raise CompileError(f"kernel {name} failed to compile for {target}: {e}") from None
            say(f"        built {i}/{len(futures)}: {name}")
    return out


def _compile_one(ks_json: str, arch: int) -> dict[str, Any]:
    """One kernel's cubin and what a launcher needs beside it: dynamic shared memory, and how many
    pointer parameters the compiler appends after the kernel's own (``extra_params``, counted in
    the PTX entry; Triton's scratch pointers: the first is ``global_scratch`` bytes per program,
    aligned to ``global_scratch_align``, or NULL when that is 0, as is the second), and the warps
    a program runs (``launch_warps``, from the compiled metadata, as Triton's own launcher takes
    it: a pass such as warp specialization may change it). Every
    pointer parameter is declared 16-byte aligned (runtimes allocate every buffer separately with
    at least that alignment), so loads vectorize as they do under Triton's JIT."""
    import os
    import re

    os.environ["TRITON_INTERPRET"] = "0"
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from inferx.compiler.codegen.gemm import signature
    from inferx.runtime.triton_kernels import load_kernel

    ks = KernelSource.from_json(json.loads(ks_json))
    fn = load_kernel(ks, interpret=False)
    sig = signature(ks)
    aligned = {(i,): [["tt.divisibility", 16]] for i, ty in enumerate(sig.values()) if ty.startswith("*")}
    compiled = triton.compile(
        ASTSource(fn=fn, signature=sig, constexprs=ks.constexprs, attrs=aligned),
        target=GPUTarget("cuda", arch, 64),
        options={"num_warps": ks.num_warps, "num_stages": ks.num_stages},
    )
    entry = re.search(r"\.entry\s+" + re.escape(ks.name) + r"\s*\((.*?)\)", compiled.asm["ptx"], re.S)
    n_params = entry.group(1).count(".param") if entry else 0
    own = sum(1 for ty in sig.values() if ty != "constexpr")
    return {"cubin": compiled.asm["cubin"], "shared": int(compiled.metadata.shared),
            "launch_warps": int(compiled.metadata.num_warps),
            "extra_params": n_params - own, "global_scratch": int(getattr(compiled.metadata, "global_scratch_size", 0)),
            "global_scratch_align": int(getattr(compiled.metadata, "global_scratch_align", 1) or 1)}
