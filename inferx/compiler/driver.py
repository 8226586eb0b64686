"""The compiler driver: a model in, an artifact out, as a flat list of numbered phases.

    1. import          the frontend builds the ix module and the weight store; with ``quant``,
                       the linears become int4 ``ix.qlinear`` (``pipeline.quantize``)
    2. cleanup         }
    3. merge-gemms     } the IR phases of the one pipeline (``inferx.compiler.pipeline``), each
    4. fuse            } a pass pipeline; ``--dump-ir DIR`` writes the IR after each
    5. plan-memory     }
    6. codegen         Triton source per kernel from its family, identical kernels shared across
                       layers; each tunable kernel on the fastest schedule the tuning database has
                       for its task, else on its family's heuristic (counted and listed as a
                       fallback); the weights kernels read are evaluated as they are bound
    7. build           cubins for sm_90 targets (``inferx.compiler.build``); CPU keeps the source
    8. launch plan     per entry point: kernels, grids, argument bindings
    9. write           the manifest (``inferx.runtime.manifest``, checked to read back as
                       written) and the artifact, under a temporary name, then renamed into
                       place; the program's tokenizer, where it has one, goes under ``tokenizer/``

Each phase reports progress through ``options.progress``. The options are checked when they are
made (``CompileOptions``); the output before phase 1 (an existing path that is not an earlier
artifact is refused, never overwritten). SIGINT, SIGTERM and SIGHUP during a compile unwind it like
an exception, so no temporary is left beside the output (``inferx.signals.terminating``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import BlockArgument, SSAValue

from inferx.compiler import pipeline
from inferx.compiler.build import build_cubins
from inferx.compiler.codegen import generate, heuristic_schedule
from inferx.compiler.families.common.tile import dim_code
from inferx.compiler.families.gemm.codegen import GEMV_MAX_ROWS
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.ops_nn import QLinearOp
from inferx.compiler.ir.types import TensorType
from inferx.compiler.options import AUTO, DEFAULT_MAX_SEQ_LEN, STORED, TARGETS, CompileError, CompileOptions
from inferx.compiler.schedules import (
    ScheduleChoice,
    per_batch,
    row_buckets,
    schedules_section,
    select_schedule,
    tuning_database,
    tuning_line,
)
from inferx.compiler.weight_store import FORMAT_NOTE, WeightFolder, safe_name, weight_bytes
from inferx.passes.plan_memory import read_plan
from inferx.program import Program
from inferx.runtime.kernel_source import KernelSource
from inferx.runtime.manifest import (
    ArgSpec,
    Binding,
    BufferSpec,
    CubinMeta,
    EntryPlan,
    KernelMeta,
    LaunchOptions,
    LaunchStep,
    Limits,
    Manifest,
    MemoryPlan,
    PlanBucket,
    Tokenizer,
    WeightMeta,
)
from inferx.signals import terminating

__all__ = ["TARGETS", "CompileError", "CompileOptions", "compile_model"]


def compile_model(src: Any, output: Path | str, options: CompileOptions) -> Path:
    """Compiles ``src`` (a path, a transformers model or a Program) into an artifact at ``output``."""
    from inferx.runtime.artifact_write import check_output

    if TARGETS[options.target] != "cpu" and options.dtype in ("fp32", "f32"):
        raise CompileError(
            f"dtype {options.dtype} does not run on target {options.target}: its kernels run bf16 "
            "and fp16 (--dtype bf16 or fp16; the cpu target runs fp32)"
        )
    for flag, on in (("fuse_mlp", options.fuse_mlp), ("fuse_attention_o", options.fuse_attention_o)):
        if on and options.max_batch > GEMV_MAX_ROWS:
            raise CompileError(
                f"{flag}: the fused decode kernel runs at most {GEMV_MAX_ROWS} rows per step "
                f"(max_batch {options.max_batch})"
            )
    check_output(output)  # before any work: an output that would be refused at the end
    with terminating():  # SIGTERM, SIGHUP and Ctrl-C unwind: the writer's temporaries are removed
        return _compile(src, Path(output), options)


def _compile(src: Any, output: Path, options: CompileOptions) -> Path:
    from inferx.runtime.artifact_write import write_artifact

    say = options.progress or (lambda msg: None)
    clock = time.perf_counter()

    def phase(n: int, what: str) -> None:
        say(f"[{n}/9] {what} ({time.perf_counter() - clock:.1f} s)")

    phase(1, "import")
    # The passes rewrite the module in place: never the caller's Program.
    program = (
        replace(src, module=src.module.clone()) if isinstance(src, Program) else pipeline.import_program(src, options)
    )
    if program.info is None:
        raise CompileError("only decoder LLMs (prefill/decode entry points) compile to artifacts for now")
    info = program.info
    if options.max_seq_len is None:
        options = replace(options, max_seq_len=min(DEFAULT_MAX_SEQ_LEN, info.max_context))
        why = "the default" if options.max_seq_len == DEFAULT_MAX_SEQ_LEN else "the model's context"
        say(f"        max_seq_len {options.max_seq_len} ({why})")
    elif options.max_seq_len > info.max_context:
        raise CompileError(f"max_seq_len {options.max_seq_len} exceeds the model's {info.max_context}")
    assert options.max_seq_len is not None  # resolved: every phase below reads this
    if TARGETS[options.target] != "cpu" and info.dtype == "f32":  # a Program imported in float32
        raise CompileError(
            f"the program is float32, which does not run on target {options.target}: its kernels "
            "run bf16 and fp16 (import it with dtype='bf16' or 'f16')"
        )
    if options.target == "cpu" and info.dtype == "bf16":
        raise CompileError(
            "--target cpu runs kernels in Triton's interpreter, where bf16 is wrong: use --dtype fp32 or fp16"
        )
    kv_amax = None
    if options.kv_dtype == "fp8" and options.kv_scale is not None:  # given: nothing to observe
        from inferx.compiler.quant.kv import uniform_kv

        kv_amax = uniform_kv(program, float(options.kv_scale))
        say(f"        kv cache fp8: scale {options.kv_scale:g} for every head (given, not calibrated)")
    elif options.kv_dtype == "fp8":  # observed on the float model, applied after the weights' quantization
        from inferx.compiler.quant.kv import observe_kv

        windows = pipeline.calibration_windows(program, options, purpose="kv_dtype fp8")
        kv_amax = observe_kv(program, windows)
        say(f"        kv cache fp8: per-head scales observed on {len(windows)} windows of "
            f"{options.calibration or 'pydoc_data.topics'}")
    if options.quant == AUTO:
        from inferx.compiler.quant.planner import PlanError
        from inferx.compiler.quant.planner import plan as plan_precisions

        try:
            plan: pipeline.PrecisionPlan | None = plan_precisions(program, options)
        except PlanError as e:
            raise CompileError(str(e)) from None
    else:
        plan = pipeline.precision_plan(program, options, src)
    if plan is not None:
        from inferx.compiler.quant.precision import summary

        program = pipeline.apply_plan(program, plan, options, src)
        how = {"rtn": "round-to-nearest", "awq": "AWQ", "gptq": "GPTQ"}[options.quant_method]
        rounded = f", rounded by {how}" if any(p != "float" for p in plan.layers.values()) else ""
        say(f"        {plan.origin}: {summary(plan.layers)} linears{rounded}")
    elif options.quant is not None:
        program = pipeline.quantize(program, options, src)
        kept = len({str(op.codes.owner) for op in program.module.walk() if isinstance(op, QLinearOp)})
        how = {"gguf": "as the GGUF file stores them", "checkpoint": "as the checkpoint stores them",
               "rtn": "by round-to-nearest", "awq": "by AWQ", "gptq": "by GPTQ",
               }[options.quant if options.quant in STORED else options.quant_method]
        head = "the LM head too" if options.quant_head else "the LM head stays float"
        say(f"        quant {options.quant}: {kept} linears in int4, {how} ({head})")
    if kv_amax is not None:
        from inferx.compiler.quant.kv import quantize_program_kv
        from inferx.passes.quantize_kv import KVQuantError

        try:
            program = quantize_program_kv(program, kv_amax)
        except (KVQuantError, KeyError) as e:
            raise CompileError(f"kv_dtype fp8: {e.args[0]}") from None
    if options.kv_block_size is not None:
        from inferx.compiler.paging import page_program, paging_for

        paging = paging_for(options.kv_block_size, options.kv_blocks, options.max_seq_len, options.max_batch)
        program = page_program(program, paging)
        say(f"        kv cache paged: {paging.blocks} blocks of {paging.block_size} positions "
            f"({paging.blocks_per_seq} a sequence at most)")
    pipeline.dump(options, "1-import", program)
    for n, (name, spec) in enumerate(pipeline.phases(options), 2):
        phase(n, name)
        pipeline.run(spec, program)
        pipeline.dump(options, f"{n}-{name}", program)
        if name == "fuse":
            pipeline.check_fused(program, options)
    funcs = {f.sym_name.data: f for f in program.module.ops if isinstance(f, FuncOp)}

    phase(6, "codegen")
    weights = WeightFolder(program)
    target = TARGETS[options.target]
    sched_target = TARGETS[options.schedules] if options.schedules else target
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
            for rows in row_buckets(kop, options):
                choice = select_schedule(kop, db, options.max_seq_len, rows)
                ks = _generate(kop, "kernel", choice, sched_target, target, rows, options.overlap)
                name = _kernel_name(kop.template.data, ks, kernels)
                if name not in kernels:
                    kernels[name] = _renamed(ks, name)
                    choices[name] = choice
                bound = rows if rows is not None else options.max_batch * options.max_seq_len
                variants.setdefault(kop, []).append((bound, name))
                if choice.record is not None:
                    bucket_ms.setdefault(name, {})[bound] = (
                        choice.record.median_ms if choice.from_rows is None else None
                    )
            named.append((kop, variants[kop][0][1]))
        per_func_kernels[fname] = named
    say(f"        {sum(len(v) for v in per_func_kernels.values())} launches, {len(kernels)} distinct kernels")
    say(f"        {tuning_line(choices)}")

    phase(7, f"build ({target})")
    binaries = build_cubins(kernels, target, options.jobs, say) if target != "cpu" else {}

    phase(8, "launch plan")
    entries = {fname: _entry_plan(func, per_func_kernels[fname], weights, variants) for fname, func in funcs.items()}

    phase(9, "write")
    files: dict[str, Any] = {}
    weight_index = {}
    for name, arr in weights.stored.items():
        fname = f"weights/{safe_name(name)}.bin"
        files[fname] = weight_bytes(arr, weights.dtypes[name])
        weight_index[name] = WeightMeta(fname, weights.manifest_shape(name), weights.dtypes[name])
    kernel_index = {}
    for name, ks in sorted(kernels.items()):
        files[f"kernels/{name}.py"] = ks.source.encode()
        cubin = None
        if name in binaries:
            built = binaries[name]
            files[f"kernels/{name}.cubin"] = built["cubin"]
            cubin = CubinMeta(
                f"kernels/{name}.cubin",
                built["shared"],
                built["extra_params"],
                built["global_scratch"],
                built["global_scratch_align"],
                built["launch_warps"],
            )
        kernel_index[name] = KernelMeta(replace(ks, source=""), f"kernels/{name}.py", cubin)
    tokenizer_files = _tokenizer_files(program, say)
    files.update(tokenizer_files)
    manifest = Manifest(
        compiler_version=_version("inferx"),
        triton_version=_version("triton"),
        target=target,
        model=program.info or info,  # kv_dtype set where the cache is FP8
        limits=Limits(options.max_batch, options.max_seq_len),
        launch=LaunchOptions(pdl=bool(options.pdl and target != "cpu"), overlap=options.overlap),
        entries=entries,
        kernels=kernel_index,
        weights=weight_index,
        memory_plan={fname: _memory_plan(func) for fname, func in funcs.items()},
        schedules=schedules_section(choices, db, options, bucket_ms),
        weights_format=FORMAT_NOTE,
        tokenizer=Tokenizer(tuple(sorted(tokenizer_files))),
        precision=_precision_document(plan),
    )
    manifest.check(files, output)
    sections = manifest.to_sections()
    out = write_artifact(output, sections, files)
    phase(9, f"wrote {out}")
    if options.write_precision_map is not None:
        _write_precision_map(options.write_precision_map, sections.get("precision"), program, say)
    return out


def _precision_document(plan: pipeline.PrecisionPlan | None) -> dict[str, Any] | None:
    from inferx.compiler.quant.precision import document

    return None if plan is None else document(plan.layers, **plan.extra)


def _write_precision_map(path: Path, doc: dict[str, Any] | None, program: Program, say: Callable[[str], None]
                         ) -> None:
    """The precision map the compile used (every linear float where none was asked for) written
    to ``path`` whole or not at all."""
    import os
    import tempfile

    from inferx.compiler.quant.precision import FLOAT, document

    if doc is None:
        from inferx.compiler.quant.precision import linear_weights

        doc = document(dict.fromkeys(linear_weights(program.module), FLOAT))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    say(f"        wrote the precision map {path}")


def _generate(
    kop: KernelOp,
    name: str,
    choice: ScheduleChoice,
    sched_target: str,
    target: str,
    rows: int | None = None,
    overlap: bool = False,
) -> KernelSource:
    schedule = choice.schedule or heuristic_schedule(kop, sched_target, rows)
    ks = generate(kop, name, sched_target, schedule, grid_dependency=target != "cpu", overlap=overlap, rows=rows)
    return ks if choice.schedule is None else replace(ks, schedule_origin=choice.origin)


def _renamed(ks: KernelSource, name: str) -> KernelSource:
    """``ks``, generated under the placeholder name "kernel", under its own name: the name is its
    def line's alone (a generator uses it nowhere else)."""
    head = "def kernel("
    if ks.source.count(head) != 1:
        raise CompileError(f"kernel {name}: its source does not define the placeholder name once")
    return replace(ks, name=name, source=ks.source.replace(head, f"def {name}(", 1))


def _kernel_name(template: str, ks: KernelSource, kernels: Mapping[str, KernelSource]) -> str:
    """A kernel's name: its template and a digest of its source. When a kernel of that name
    launches differently (other constexprs, warps, stages, grid or scratch: schedules that change
    no line of source, such as decode attention's SPLITS; other parameter dtypes or outputs
    written in place: kernels whose body reads none of them, such as an empty launch), a digest
    of how it launches is appended, so two such kernels never share a name."""
    name = f"{template}_{hashlib.sha256(ks.source.encode()).hexdigest()[:12]}"
    first = kernels.get(name)
    if first is None or _launch_shape(first, True) == _launch_shape(ks, True):
        return name
    # the digest of the schedule's launch where that differs (names stay those of earlier builds)
    full = _launch_shape(first) == _launch_shape(ks)
    return f"{name}_{hashlib.sha256(json.dumps(_launch_shape(ks, full), sort_keys=True).encode()).hexdigest()[:8]}"


def _launch_shape(ks: KernelSource, bindings: bool = False) -> dict[str, Any]:
    """How ``ks`` launches: its schedule's constants, warps, stages, grid and scratch, and with
    ``bindings`` its parameters and in-place outputs."""
    d = ks.to_json()
    keys = ("constexprs", "num_warps", "num_stages", "grid", "scratch") + (("params", "aliases") if bindings else ())
    return {k: d[k] for k in keys}


def _tokenizer_files(program: Program, say: Callable[[str], None]) -> dict[str, bytes]:
    """The program's tokenizer as ``save_pretrained`` writes it, each file under ``tokenizer/``
    (read back with ``transformers.AutoTokenizer``); nothing, with a note, when it has none."""
    import tempfile

    from inferx.compiler.frontend.tokenizer import TokenizerError

    if program.tokenizer is None:
        say("        no tokenizer: the artifact takes token ids only")
        return {}
    with tempfile.TemporaryDirectory(prefix="inferx-tokenizer-") as tmp:
        try:
            program.tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
        except TokenizerError as e:  # the checkpoint's, built on first use: its message names it
            raise CompileError(str(e)) from None
        except Exception as e:  # a third-party tokenizer: name what failed, whatever it raised
            raise CompileError(f"cannot save the model's tokenizer: {type(e).__name__}: {e}") from None
        root = Path(tmp)
        found = sorted(p for p in root.rglob("*") if p.is_file())
        files = {f"tokenizer/{p.relative_to(root).as_posix()}": p.read_bytes() for p in found}
    say(f"        tokenizer: {len(files)} files")
    return files


def _version(pkg: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(pkg)
    except PackageNotFoundError:
        return "unknown"


def _binding(v: SSAValue, buffers: dict[SSAValue, str], weights: WeightFolder) -> Binding:
    if isinstance(v, BlockArgument):
        return Binding("arg", index=v.index)
    if v in buffers:
        return Binding("buffer", name=buffers[v])
    return Binding("weight", name=weights.name_of(v))


def _entry_plan(
    func: FuncOp,
    kernels: list[tuple[KernelOp, str]],
    weights: WeightFolder,
    variants: Mapping[KernelOp, list[tuple[int, str]]],
) -> EntryPlan:
    """The launch plan of one entry. A launch whose kernel has per-bucket variants lists them in
    ``by_rows``, ascending, its rows counting batch x seq (a prompt's tokens), or the batch where
    the launch's ``rows`` is "batch" (a decode kernel); ``kernel`` is the first's."""
    buffers: dict[SSAValue, str] = {}
    buffer_types: dict[str, BufferSpec] = {}
    launches = []
    for kop, name in kernels:
        ins = tuple(_binding(v, buffers, weights) for v in kop.operands)
        outs = []
        for i, r in enumerate(kop.results):
            bname = f"{kop.attributes['name'].data}#{i}"  # type: ignore[attr-defined]
            buffers[r] = bname
            ty = r.type
            assert isinstance(ty, TensorType)
            buffer_types[bname] = BufferSpec(tuple(dim_code(d) for d in ty.shape), ty.dtype.value)
            outs.append(Binding("buffer", name=bname))
        launch = LaunchStep(name, ins, tuple(outs))
        if len({n for _, n in variants.get(kop, [])}) > 1:
            # a decode kernel's rows are the batch's, also in a prefill entry's tail
            launch = replace(launch, by_rows=tuple(variants[kop]), rows="batch" if per_batch(kop) else None)
        launches.append(launch)
    ret = func.body.block.last_op
    assert isinstance(ret, ReturnOp)
    args = []
    for a in func.body.block.args:
        ty = a.type
        assert isinstance(ty, TensorType)
        args.append(ArgSpec(a.name_hint or f"arg{a.index}", tuple(dim_code(d) for d in ty.shape), ty.dtype.value))
    return EntryPlan(
        tuple(args), tuple(launches), buffer_types, tuple(_binding(v, buffers, weights) for v in ret.operands)
    )


def _memory_plan(func: FuncOp) -> MemoryPlan | None:
    plan = read_plan(func)
    if plan is None:
        return None
    return MemoryPlan(
        str(plan.to_attr()), tuple(PlanBucket(dict(b.dims), b.peak, b.no_reuse, b.kv) for b in plan.buckets)
    )
