"""The `inferx` command group and `inferx-compile`. User errors print one message, no traceback,
and exit 1; a usage error exits 2 (click's convention)."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from inferx.cli_common import UserError, _check_output_file, _runtime_errors, _user_errors, main

if TYPE_CHECKING:
    pass


SPLIT_MARKER = "// -----"
# Above a real model's module (a 126-layer Llama's fused IR has about 21k ops) and a bound on how
# long `inferx opt` takes: xDSL parses and verifies about a thousand ops a second.
MAX_OPT_OPS = 30_000
# A line that starts with an op (the printer's form: one op a line, its results first).
_OP_LINE = re.compile(r'^[ \t]*(?:%[^=\n]*=[ \t]*)?"?[A-Za-z_][\w$]*\.[\w.$]+', re.MULTILINE)


@main.command("opt")
@click.argument("file", default="-")
@click.option("-p", "--pipeline", default="", help='Passes to run, e.g. "canonicalize,cse,dce".')
@click.option("-o", "--output", default="-", help="Where to write the result (default: stdout).")
@click.option("--print-ir-after-all", is_flag=True, help="Print the IR to stderr after every pass.")
@click.option(
    "--print-ir-after",
    "print_after",
    multiple=True,
    metavar="NAME",
    help="Print the IR to stderr after each run of pass NAME (repeatable).",
)
@click.option(
    "--split-input-file",
    is_flag=True,
    help=f"Treat each chunk between '{SPLIT_MARKER}' lines as its own module; report every chunk's error and go on.",
)
@click.option("--list-passes", is_flag=True, help="List the passes and their options.")
@click.option(
    "--max-ops",
    type=int,
    default=MAX_OPT_OPS,
    show_default=True,
    help="Refuse input of more ops than this (parsing and verifying take about a millisecond an op).",
)
def opt_command(
    file: str,
    pipeline: str,
    output: str,
    print_ir_after_all: bool,
    print_after: tuple[str, ...],
    split_input_file: bool,
    list_passes: bool,
    max_ops: int,
) -> None:
    """Parse IR text, verify it, run PIPELINE, print the result (like mlir-opt)."""
    from inferx.compiler.ir.textio import IRError, parse_module, verify_module
    from inferx.compiler.pipeline import registry
    from inferx.passes.pipeline import PassManager, PipelineError, describe, parse

    passes = registry()
    if list_passes:
        click.echo(describe(passes))
        return
    unknown_after = [n for n in print_after if n not in passes]
    if unknown_after:
        raise UserError(f"--print-ir-after: unknown pass {unknown_after[0]!r}; the passes are:\n{describe(passes)}")
    try:
        pass_list = parse(pipeline, passes) if pipeline.strip() else []
    except PipelineError as e:
        raise UserError(str(e)) from None

    name = "<stdin>" if file == "-" else file
    if output != "-":
        _check_output_file(output, "-o")
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_bytes().decode("utf-8")
    except OSError as e:
        raise UserError(f"cannot read {file}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"cannot read {file}: not UTF-8 text (byte {e.start})") from None
    ops = len(_OP_LINE.findall(text))
    if ops > max_ops:
        raise UserError(
            f"{name}: {ops} ops, more than --max-ops {max_ops} (parsing and verifying take about a "
            "millisecond an op): raise --max-ops to wait for it"
        )

    def after(p, module) -> None:  # type: ignore[no-untyped-def]
        if print_ir_after_all or p.name in print_after:
            click.echo(f"// -----// IR after {p.name} //----- //\n{str(module)}", err=True)

    chunks = _split(text) if split_input_file else [(0, text)]
    outputs: list[str] = []
    failed = False
    for line_offset, chunk in chunks:
        try:
            module, source = parse_module("\n" * line_offset + chunk, name)
            verify_module(module, source)
            PassManager(pass_list, after).run(module)
            outputs.append(str(module))
        except (IRError, RecursionError) as e:
            # xDSL's parser, verifier and printer recurse into nested ops, types and attributes
            msg = str(e) if isinstance(e, IRError) else f"{name}: error: the IR nests too deeply to process"
            if not split_input_file:
                raise UserError(msg) from None
            click.echo(msg, err=True)
            failed = True
    result = f"\n{SPLIT_MARKER}\n".join(outputs) + "\n"
    if output == "-":
        click.echo(result, nl=False)
    else:
        _write_text(Path(output), result)
    if failed:
        sys.exit(1)


def _write_text(path: Path, text: str) -> None:
    """Writes ``path`` whole or not at all (a temporary beside it, renamed into place)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror}") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _split(text: str) -> list[tuple[int, str]]:
    """Chunks between ``// -----`` lines, each with the number of lines before it."""
    chunks: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for i, line in enumerate(text.split("\n")):
        if line.strip() == SPLIT_MARKER:
            chunks.append((start, "\n".join(current)))
            current, start = [], i + 1
        else:
            current.append(line)
    chunks.append((start, "\n".join(current)))
    return chunks


# --- compile --------------------------------------------------------------------------------

TARGET_CHOICES = "h200|h100|sm_90|cpu"
DTYPE_CHOICES = ("fp32", "fp16", "bf16")  # inferx.compiler.options.DTYPES, without importing the compiler


def _compile_errors() -> tuple[type[BaseException], ...]:
    """What compiling raises for a model, option or output the user gave (not a compiler bug)."""
    from inferx.compiler.families.common.errors import CodegenError
    from inferx.compiler.frontend.hf import ModelImportError
    from inferx.compiler.frontend.weights import WeightError
    from inferx.compiler.options import CompileError
    from inferx.models.config import ConfigError
    from inferx.passes.plan_memory import PlanError
    from inferx.runtime.artifact import ArtifactError

    return (OSError, CompileError, CodegenError, ModelImportError, WeightError, ConfigError, PlanError, ArtifactError)


OVERLAP_HELP = (
    "Decode GEMVs load their first weight tiles before waiting for the kernel before them and let the "
    "next one start right after: under PDL, their weights stream as the kernel before ends."
)
FUSE_MLP_HELP = (
    "Each decode layer's MLP (gate|up and down GEMVs) as one kernel, for --max-batch up to 8 "
    "(off by default: slower than the two kernels on Hopper; see docs/performance.md)."
)
FUSE_ATTENTION_O_HELP = (
    "Each decode layer's attention and o projection as one kernel (no split of the context), "
    "for --max-batch up to 8 (off by default: slower than the two kernels on Hopper; "
    "see docs/performance.md)."
)


@main.command("compile", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="ARTIFACT",
    help="Artifact path: a directory, or a single file ending in .ixa.",
)
@click.option(
    "--target",
    default="h200",
    metavar=f"[{TARGET_CHOICES}]",
    show_default=True,
    help="sm_90 cubins for Hopper GPUs, or cpu (Triton source run by the interpreter; fp32/fp16).",
)
@click.option(
    "--dtype",
    default=None,
    metavar=f"[{'|'.join(DTYPE_CHOICES)}]",
    help="Weight and activation dtype (default: the checkpoint's, but bf16 for a float32 checkpoint on a "
    "GPU target, whose kernels run bf16 and fp16).",
)
@click.option(
    "--max-seq-len",
    type=int,
    default=None,
    help="Longest context a sequence may reach (default: 2048, or the model's context where that is shorter).",
)
@click.option("--max-batch", type=int, default=8, show_default=True, help="Most sequences per step.")
@click.option(
    "--dump-ir", default=None, metavar="DIR", help="Write the IR after each of the first five phases into DIR."
)
@click.option(
    "--jobs",
    type=int,
    default=None,
    metavar="N",
    help="Worker processes building cubins (default: the CPU count, at most 8).",
)
@click.option(
    "--pdl/--no-pdl",
    default=True,
    show_default=True,
    help="CUDA sessions launch the artifact's kernels with programmatic dependent launch "
    "(each may start as the one before it ends) unless told otherwise.",
)
@click.option("--overlap/--no-overlap", default=False, show_default=True, help=OVERLAP_HELP)
@click.option("--fuse-mlp/--no-fuse-mlp", default=False, show_default=True, help=FUSE_MLP_HELP)
@click.option("--fuse-attention-o/--no-fuse-attention-o", default=False, show_default=True, help=FUSE_ATTENTION_O_HELP)
@click.option(
    "--quant",
    default=None,
    metavar="SCHEME",
    help="int4 weights for every linear but the LM head: int4-g128, int4-g64 or int4-g32 (groups of K with "
    "a scale and a minimum each; -sym for a scale alone), gguf (a GGUF file's 4-bit weights as stored), or "
    "checkpoint (an HF GPTQ or AWQ checkpoint's int4 weights as stored: such a checkpoint needs it); fp8: "
    "FP8 W8A8 (E4M3 weights with a scale per output channel, activations quantized per token); or auto: the "
    "precision planner picks float, fp8 or int4 for each linear within --accuracy-budget.",
)
@click.option("--accuracy-budget", default=None, metavar="PERCENT",
              help="With --quant auto: the perplexity increase allowed over the float model on the --calibration "
              "text, e.g. 1%.")
@click.option("--fp8-activations", type=click.Choice(["dynamic", "minmax", "percentile", "entropy"]),
              default="dynamic", show_default=True,
              help="FP8 linears' activation scales: each token its own, or one static scale per input chosen on "
              "--calibration text by an observer (largest value, 99.99th percentile, or least KL divergence).")
@click.option("--smoothquant", type=click.FloatRange(0, 1), default=None, metavar="ALPHA",
              help="Migrate ALPHA of the activation range of the inputs FP8 linears read into their weights "
              "(SmoothQuant), observed on --calibration text.")
@click.option("--kv-dtype", type=click.Choice(["auto", "fp8"]), default="auto", show_default=True,
              help="The KV cache's element type: the model's dtype, or fp8 (E4M3 keys and values with one scale "
              "per KV head and layer, calibrated on --calibration text; half the bytes attention reads).")
@click.option("--kv-scale", type=float, default=None, metavar="S",
              help="With --kv-dtype fp8: scale S for every KV head and layer instead of calibrating (values past "
              "448 x S saturate).")
@click.option("--kv-block-size", type=click.IntRange(min=1), default=None, metavar="B",
              help="A paged KV cache: keys and values in a pool of blocks of B positions, each sequence's blocks "
              "named by a block table (the serving engine shares prompt prefixes' blocks and admits requests by "
              "the blocks free). Default: one contiguous cache row per sequence.")
@click.option("--kv-blocks", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --kv-block-size: the pool's blocks. Default: as many as --max-batch sequences at "
              "--max-seq-len take.")
@click.option("--precision-map", default=None, metavar="FILE",
              help="Each linear's precision (float, fp8 or an int4 scheme) from a JSON precision map, as "
              "--quant auto writes it (--write-precision-map) or as edited by hand; takes no --quant.")
@click.option("--write-precision-map", default=None, metavar="FILE",
              help="Write the precision map the compile used (with --quant auto: the plan, its predicted "
              "decode time and measured perplexity) to FILE.")
@click.option(
    "--quant-method",
    type=click.Choice(["rtn", "awq", "gptq"]),
    default="rtn",
    show_default=True,
    help="How --quant rounds: round-to-nearest, or AWQ or GPTQ calibrated on --calibration text.",
)
@click.option(
    "--calibration",
    default=None,
    metavar="FILE",
    help="UTF-8 text that AWQ and GPTQ run through the model (default: CPython's documentation text).",
)
@click.option("--quant-head/--no-quant-head", default=False, show_default=True,
              help="Quantize the LM head too (with a --quant scheme, fp8, or auto: a candidate of the plan).")
@click.option("--quant-override", "quant_overrides", multiple=True, metavar="PATTERN=PRECISION",
              help="With a --quant scheme or fp8: the weights whose names match PATTERN (fnmatch, e.g. "
              "'*down_proj*') under PRECISION instead: float, fp8 or an int4 scheme; repeat, the first match wins.")
@click.option("--dense-prompt-weights/--no-dense-prompt-weights", default=True, show_default=True,
              help="With int4 weights: prompts past 128 rows read each weight dequantized once per prompt into "
              "a buffer the size of the largest int4 weight at two bytes an element, rather than unpacking it "
              "in every tile (faster for long prompts, that much memory per prompt bucket).")
@click.option("--fp8-inputs-once/--no-fp8-inputs-once", default=True, show_default=True,
              help="With FP8 linears: a prompt's FP8 GEMMs read x quantized once by a kernel of its own (one "
              "per input), rather than quantizing it in every tile.")
@click.option("--fp8-decode-min-batch", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --fp8-inputs-once: decode steps' FP8 GEMMs too, in the batch buckets of N rows and more "
              "(below, they quantize x in their tiles). Default: decode GEMMs quantize in their tiles.")
def compile_command(
    model: str,
    output: str,
    target: str,
    dtype: str | None,
    max_seq_len: int | None,
    max_batch: int,
    dump_ir: str | None,
    jobs: int | None,
    pdl: bool,
    overlap: bool,
    fuse_mlp: bool,
    fuse_attention_o: bool,
    quant: str | None,
    quant_method: str,
    calibration: str | None,
    quant_head: bool,
    quant_overrides: tuple[str, ...],
    dense_prompt_weights: bool,
    fp8_inputs_once: bool,
    fp8_decode_min_batch: int | None,
    accuracy_budget: str | None,
    fp8_activations: str,
    smoothquant: float | None,
    kv_dtype: str,
    kv_scale: float | None,
    kv_block_size: int | None,
    kv_blocks: int | None,
    precision_map: str | None,
    write_precision_map: str | None,
) -> None:
    """Compile MODEL (an HF checkpoint directory or a GGUF file) into an artifact.

    Progress goes to stderr; the artifact's path to stdout."""
    from inferx.compiler.driver import compile_model
    from inferx.compiler.options import CompileError, CompileOptions

    path = Path(model)
    if not path.exists():
        raise UserError(f"{model}: no such file or directory")
    if not path.is_dir() and path.suffix != ".gguf":
        raise UserError(f"{model}: expected an HF model directory or a .gguf file")
    if path.suffix == ".gguf" and not path.is_file():
        raise UserError(f"{model}: a .gguf model must be a file")
    if dump_ir is not None and Path(dump_ir).exists() and not Path(dump_ir).is_dir():
        raise UserError(f"--dump-ir {dump_ir}: exists and is not a directory")
    if calibration is not None and not Path(calibration).is_file():
        raise UserError(f"--calibration {calibration}: no such file")
    if precision_map is not None and not Path(precision_map).is_file():
        raise UserError(f"--precision-map {precision_map}: no such file")
    if write_precision_map is not None and Path(write_precision_map).is_dir():
        raise UserError(f"--write-precision-map {write_precision_map}: is a directory")
    budget = _percent(accuracy_budget, "--accuracy-budget") if accuracy_budget is not None else None
    try:
        options = CompileOptions(
            target=target,
            dtype=dtype,
            max_seq_len=max_seq_len,
            max_batch=max_batch,
            dump_ir=Path(dump_ir) if dump_ir else None,
            progress=lambda line: click.echo(line, err=True),
            jobs=jobs if jobs is not None else min(8, os.cpu_count() or 2),
            pdl=pdl,
            overlap=overlap,
            fuse_mlp=fuse_mlp,
            fuse_attention_o=fuse_attention_o,
            quant=quant,
            quant_method=quant_method,
            calibration=Path(calibration) if calibration else None,
            quant_head=quant_head,
            quant_overrides=quant_overrides,
            dense_prompt_weights=dense_prompt_weights,
            fp8_inputs_once=fp8_inputs_once,
            fp8_decode_min_batch=fp8_decode_min_batch,
            accuracy_budget=budget,
            fp8_activations=fp8_activations,
            smoothquant=smoothquant,
            kv_dtype=None if kv_dtype == "auto" else kv_dtype,
            kv_scale=kv_scale,
            kv_block_size=kv_block_size,
            kv_blocks=kv_blocks,
            precision_map=Path(precision_map) if precision_map else None,
            write_precision_map=Path(write_precision_map) if write_precision_map else None,
        )
    except CompileError as e:  # an option's field, said as its flag
        raise UserError(
            re.sub(r"^(max_seq_len|max_batch|jobs|quant_head|quant_method|calibration|quant_overrides|"
                   r"accuracy_budget|precision_map|fp8_activations|smoothquant|kv_dtype|kv_scale|kv_block_size|"
                   r"kv_blocks):? ",
                   lambda m: f"--{m[1].replace('_', '-').replace('overrides', 'override')} ", str(e))
        ) from None
    with _user_errors(_compile_errors()):
        out = compile_model(path, Path(output), options)
    click.echo(str(out))


def _percent(text: str, flag: str) -> float:
    """``1%`` or ``0.01`` as the fraction 0.01; UserError naming ``flag`` otherwise."""
    t = text.strip()
    try:
        value = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UserError(f"{flag} {text!r}: expected a percentage such as 1% (or a fraction such as 0.01)") from None
    if not 0 < value <= 1:
        raise UserError(f"{flag} {text!r}: must be more than 0% and at most 100%")
    return value


def compile_main() -> None:
    """Entry point of `inferx-compile`: the same command as `inferx compile`."""
    compile_command(prog_name="inferx-compile")


# --- tune -----------------------------------------------------------------------------------


@main.command("tune")
@click.argument("model")
@click.option("--target", default="h200", metavar="[h200|h100]", show_default=True)
@click.option("--budget", default="20m", show_default=True, help="Wall time to spend, e.g. 90s, 20m, 1h.")
@click.option("--trials", type=click.IntRange(min=1), default=None, help="Stop after N new measurements.")
@click.option(
    "--runner",
    type=click.Choice(["local", "replay"]),
    default="local",
    show_default=True,
    help="local: measure on this machine's GPU; replay: answer from recorded measurements.",
)
@click.option("--replay", multiple=True, metavar="FILE", help="Records (jsonl, or a folder of them) to replay.")
@click.option("--out", default=None, metavar="DIR", help="Tuning database root (default: the shipped tuning_logs/).")
@click.option("--max-seq-len", type=int, default=2048, show_default=True)
@click.option(
    "--max-batch",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Tune decode GEMMs and attention at each batch bucket up to this (1, 4, 16, 64, ...).",
)
@click.option("--dtype", default=None, metavar=f"[{'|'.join(DTYPE_CHOICES)}]")
@click.option("--strategy", type=click.Choice(["evolutionary", "random"]), default="evolutionary", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--jobs", type=click.IntRange(min=1), default=8, show_default=True, help="Kernel build workers.")
@click.option(
    "--only",
    multiple=True,
    metavar="TEXT",
    help="Tune only the tasks whose line (as listed at the start) contains TEXT; repeat to narrow, "
    "e.g. --only prefill --only rmsnorm.",
)
@click.option(
    "--skip",
    multiple=True,
    metavar="TEXT",
    help="Leave out the tasks whose line contains TEXT; repeat to leave out more, e.g. --skip 'rows<=512'.",
)
@click.option(
    "--fuse-mlp/--no-fuse-mlp",
    default=False,
    show_default=True,
    help="Tune the decode MLPs as `compile --fuse-mlp` makes them (one mlp kernel each).",
)
@click.option(
    "--fuse-attention-o/--no-fuse-attention-o",
    default=False,
    show_default=True,
    help="Tune the decode attentions as `compile --fuse-attention-o` makes them (with the o projection).",
)
@click.option(
    "--sustain-ms",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Time each candidate after this long of back-to-back replays of it: the clocks the GPU's power "
    "cap allows, as in a long prefill. Its records then rank the task's schedules alone.",
)
@click.option("--quant", default=None, metavar="SCHEME",
              help="Tune the quantized kernels of MODEL compiled with --quant SCHEME: int4-g128 etc. (qgemm), "
              "fp8 (fp8gemm).")
@click.option("--quant-head/--no-quant-head", default=False, show_default=True,
              help="With --quant, the LM head quantized too.")
@click.option("--kv-block-size", type=click.IntRange(min=1), default=None, metavar="B",
              help="Tune the attention kernels as `compile --kv-block-size B` makes them (a paged KV cache).")
def tune_command(
    model: str,
    target: str,
    budget: str,
    trials: int | None,
    runner: str,
    replay: tuple[str, ...],
    out: str | None,
    max_seq_len: int,
    max_batch: int,
    dtype: str | None,
    strategy: str,
    seed: int,
    jobs: int,
    only: tuple[str, ...],
    skip: tuple[str, ...],
    fuse_mlp: bool,
    fuse_attention_o: bool,
    sustain_ms: float,
    quant: str | None,
    quant_head: bool,
    kv_block_size: int | None,
) -> None:
    """Tune the GEMM and attention schedules of MODEL (and the fused decode kernels with --fuse-mlp,
    --fuse-attention-o; the int4 GEMMs with --quant); records are appended to the tuning database."""
    from inferx.autotune.tune import TuneError, TuneOptions, parse_budget, tune
    from inferx.compiler.database import DEFAULT_ROOT

    for path in replay:
        if not Path(path).exists():
            raise UserError(f"--replay {path}: no such file or directory")
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    with _user_errors((TuneError, *_compile_errors())):
        options = TuneOptions(
            target=target,
            budget_s=parse_budget(budget),
            trials=trials,
            runner=runner,
            replay=replay,
            max_seq_len=max_seq_len,
            max_batch=max_batch,
            dtype=dtype,
            seed=seed,
            jobs=jobs,
            strategy=strategy,
            out=Path(out) if out else DEFAULT_ROOT,
            only=only,
            skip=skip,
            fuse_mlp=fuse_mlp,
            fuse_attention_o=fuse_attention_o,
            sustain_ms=sustain_ms,
            quant=quant,
            quant_head=quant_head,
            kv_block_size=kv_block_size,
        )
        result = tune(model, options, say=lambda line: click.echo(line, err=True))
    if result.stopped.startswith("interrupted"):
        raise SystemExit(130 if "SIGINT" in result.stopped else 143)


# --- bench ----------------------------------------------------------------------------------


@main.command("bench")
@click.option("--shape", default="1b,8b", show_default=True, help="Model shapes: 1b, 8b, tiny (comma-separated).")
@click.option("--batch", default="1,4,16,64", show_default=True, help="Decode batch sizes.")
@click.option("--context", default="512,2048", show_default=True, help="Decode contexts (the new token included).")
@click.option("--prefill", default="512,2048", show_default=True, help="Prefill lengths (batch 1); empty for none.")
@click.option("--peers", default="eager,hf,compile", show_default=True, help="Peers to time beside InferX.")
@click.option(
    "--compile-mode",
    default="reduce-overhead",
    show_default=True,
    help="torch.compile modes for the decode peer, comma-separated; the fastest is shown.",
)
@click.option("--iters", type=int, default=30, show_default=True, help="Timed steps per measurement.")
@click.option("--warmup", type=int, default=5, show_default=True, help="Untimed steps before them.")
@click.option("--device", type=click.Choice(["cuda", "cpu"]), default="cuda", show_default=True)
@click.option("--out", default=None, help="Write every measurement as JSON here.")
@click.option(
    "--workdir",
    default=None,
    help="Keep checkpoints and artifacts here and reuse them (default: a temporary directory).",
)
@click.option(
    "--pdl/--no-pdl",
    default=True,
    show_default=True,
    help="Launch InferX's CUDA kernels with programmatic dependent launch (each may start as the one before it ends).",
)
@click.option("--overlap/--no-overlap", default=False, show_default=True, help=OVERLAP_HELP)
@click.option("--fuse-mlp/--no-fuse-mlp", default=False, show_default=True, help=FUSE_MLP_HELP)
@click.option("--fuse-attention-o/--no-fuse-attention-o", default=False, show_default=True, help=FUSE_ATTENTION_O_HELP)
@click.option(
    "--prefill-last/--no-prefill-last",
    default=False,
    show_default=True,
    help="Also time each prefill returning the last token's logits alone (InferX's prefill_last entry; "
    "the peers compute the LM head over the last token alone too).",
)
@click.option(
    "--quant",
    default=None,
    metavar="SCHEME",
    help="Also compile and time an artifact whose layers' linears are int4 under SCHEME (e.g. int4-g128) or "
    "FP8 (fp8), beside the bf16 one in the same process.",
)
@click.option("--quant-head/--no-quant-head", default=False, show_default=True,
              help="With --quant, the quantized artifact's LM head quantized too.")
@click.option("--kv-fp8/--no-kv-fp8", default=False, show_default=True,
              help="With --quant, the quantized artifact's KV cache in FP8 (scale 1: random weights).")
@click.option("--fp8-inputs-once/--no-fp8-inputs-once", default=True, show_default=True,
              help="With --quant fp8, prompts' x quantized once by a kernel of its own for their FP8 GEMMs "
              "(the compiler's default), or in each GEMM tile.")
@click.option("--fp8-decode-min-batch", type=click.IntRange(min=1), default=None, metavar="N",
              help="With --quant fp8 and --fp8-inputs-once, decode batches' x quantized once too, in the batch "
              "buckets of N rows and more (the compiler's option of that name).")
def bench_command(
    shape: str,
    batch: str,
    context: str,
    prefill: str,
    peers: str,
    compile_mode: str,
    iters: int,
    warmup: int,
    device: str,
    out: str | None,
    workdir: str | None,
    pdl: bool,
    overlap: bool,
    fuse_mlp: bool,
    fuse_attention_o: bool,
    prefill_last: bool,
    quant: str | None,
    quant_head: bool,
    kv_fp8: bool,
    fp8_inputs_once: bool,
    fp8_decode_min_batch: int | None,
) -> None:
    """Time InferX against PyTorch eager, HF transformers and torch.compile on Llama-shaped models
    with random weights, against the roofline. Progress to stderr, tables to stdout."""
    from inferx.benchmark.main import BenchError, bench, options

    if out is not None:
        _check_output_file(out, "--out")
    if workdir is not None and Path(workdir).exists() and not Path(workdir).is_dir():
        raise UserError(f"--workdir {workdir}: exists and is not a directory")
    try:
        opts = options(
            shape,
            batch,
            context,
            prefill,
            peers,
            compile_mode,
            iters,
            warmup,
            device,
            workdir,
            pdl=pdl,
            overlap=overlap,
            fuse_mlp=fuse_mlp,
            fuse_attention_o=fuse_attention_o,
            prefill_last=prefill_last,
            quant=quant,
            quant_head=quant_head,
            kv_fp8=kv_fp8,
            fp8_inputs_once=fp8_inputs_once,
            fp8_decode_min_batch=fp8_decode_min_batch,
        )
        bench(opts, Path(out) if out else None)
    except BenchError as e:
        raise UserError(str(e)) from None


# --- inspect --------------------------------------------------------------------------------


@main.command("inspect")
@click.argument("artifact")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def inspect_command(artifact: str, as_json: bool) -> None:
    """Summarize ARTIFACT: target, versions, model, limits, kernels per entry and per layer, each
    kernel's schedule and where it came from, the memory plan per bucket, and schedule fallbacks.
    Verifies every file's hash first."""
    from inferx.inspect_report import inspect_summary, render_summary
    from inferx.runtime.artifact import load_artifact
    from inferx.runtime.manifest import Manifest

    with _user_errors(_runtime_errors()):
        art = load_artifact(artifact)
        summary = inspect_summary(art, Manifest.from_sections(art.manifest, art.path))
    click.echo(json.dumps(summary, indent=2) if as_json else render_summary(summary))


# the generation and serving commands register themselves on ``main``
from inferx import cli_serving  # noqa: E402,F401
