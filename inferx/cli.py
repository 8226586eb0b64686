"""The `inferx` command group and `inferx-compile`. User errors print one message, no traceback,
and exit 1; a usage error exits 2 (click's convention)."""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    pass


class UserError(click.ClickException):
    """An error in what the user gave us: one message, no traceback, exit code 1.

    Messages that already carry a location (``file:line:col: error: ...``) print as they are;
    others get an ``error:`` prefix.
    """

    def show(self, file=None) -> None:  # type: ignore[no-untyped-def]
        located = ": error: " in self.message.split("\n", 1)[0]
        click.echo(self.message if located else f"error: {self.message}", err=True)


SPLIT_MARKER = "// -----"
# Above a real model's module (a 126-layer Llama's fused IR has about 21k ops) and a bound on how
# long `inferx opt` takes: xDSL parses and verifies about a thousand ops a second.
MAX_OPT_OPS = 30_000
# A line that starts with an op (the printer's form: one op a line, its results first).
_OP_LINE = re.compile(r'^[ \t]*(?:%[^=\n]*=[ \t]*)?"?[A-Za-z_][\w$]*\.[\w.$]+', re.MULTILINE)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="inferx")
def main() -> None:
    """InferX: compile HuggingFace LLMs into artifacts that run at the bandwidth limit of Hopper GPUs."""


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


def _check_output_file(value: str, option: str) -> None:
    """A UserError unless ``value`` can be written as a file: not a directory, in a directory."""
    path = Path(value)
    if path.is_dir():
        raise UserError(f"{option} {value}: is a directory, not a file")
    if not path.parent.is_dir():
        raise UserError(f"{option} {value}: no directory {path.parent}")


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


def _runtime_errors() -> tuple[type[BaseException], ...]:
    from inferx.runtime.artifact import ArtifactError
    from inferx.runtime.cuda_driver import CudaError
    from inferx.runtime.session import SessionError

    return (OSError, ArtifactError, SessionError, CudaError)


def _one_line(e: BaseException) -> str:
    """The error's message on one line; an OSError names its file."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    else:
        text = str(e) or type(e).__name__
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


@contextmanager
def _user_errors(kinds: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Turns the given exception types into a one-line UserError; anything else is a bug and keeps
    its traceback."""
    try:
        yield
    except kinds as e:
        raise UserError(_one_line(e)) from None


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
            precision_map=Path(precision_map) if precision_map else None,
            write_precision_map=Path(write_precision_map) if write_precision_map else None,
        )
    except CompileError as e:  # an option's field, said as its flag
        raise UserError(
            re.sub(r"^(max_seq_len|max_batch|jobs|quant_head|quant_method|calibration|quant_overrides|"
                   r"accuracy_budget|precision_map|fp8_activations|smoothquant|kv_dtype|kv_scale):? ",
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
        )
        result = tune(model, options, say=lambda line: click.echo(line, err=True))
    if result.stopped.startswith("interrupted"):
        raise SystemExit(130 if "SIGINT" in result.stopped else 143)


# --- run ------------------------------------------------------------------------------------


@main.command("run")
@click.argument("artifact")
@click.option(
    "--prompt-ids",
    "prompt_ids",
    multiple=True,
    metavar="IDS",
    help="Comma-separated token ids, e.g. 1,2,3; repeat for a batch.",
)
@click.option(
    "--prompt",
    "prompts",
    multiple=True,
    metavar="TEXT",
    help="Text, tokenized by the artifact's tokenizer; repeat for a batch.",
)
@click.option(
    "--chat",
    "chats",
    multiple=True,
    metavar="TEXT",
    help="A user's message, put in the artifact's chat template with the assistant's turn to follow; "
    "repeat for a batch.",
)
@click.option("--system", default=None, metavar="TEXT", help="With --chat, a system message first.")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--temperature", type=float, default=0.0, show_default=True, help="0: greedy; else sampled.")
@click.option("--top-k", type=int, default=0, show_default=True, help="Sample among the k most likely (0: off).")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="Nucleus sampling (1: off).")
@click.option("--min-p", type=float, default=0.0, show_default=True,
              help="Drop tokens under this fraction of the most likely's probability (0: off).")
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True, help="1: off.")
@click.option("--seed", type=int, default=None,
              help="Seed of the draws (sequence i draws from seed + i); printed when not given.")
@click.option("--logprobs", is_flag=True, help="Print each generated token's log-probability too.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def run_command(
    artifact: str,
    prompt_ids: tuple[str, ...],
    prompts: tuple[str, ...],
    chats: tuple[str, ...],
    system: str | None,
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    repetition_penalty: float,
    seed: int | None,
    logprobs: bool,
    device: str,
    as_json: bool,
) -> None:
    """Generation from ARTIFACT (greedy unless --temperature is above 0): prints the generated
    token ids, and their text where the artifact carries a tokenizer."""
    from inferx.runtime.artifact import load_artifact
    from inferx.runtime.loaded import load
    from inferx.runtime.manifest import Manifest
    from inferx.runtime.sampling import SamplingError, SamplingParams

    try:
        sampling = SamplingParams(temperature, top_k, top_p, min_p, repetition_penalty, seed)
    except SamplingError as e:
        raise UserError(f"--{str(e.param).replace('_', '-')}: {e}") from None
    if not sampling.greedy and seed is None:
        sampling = sampling.seeded()
        click.echo(f"seed {sampling.seed} (--seed {sampling.seed} draws the same tokens again)", err=True)

    if sum(map(bool, (prompt_ids, prompts, chats))) != 1:
        raise UserError("give the prompt as --prompt-ids 1,2,3, as --prompt TEXT or as --chat TEXT (one of the three)")
    if system is not None and not chats:
        raise UserError("--system is the system message of a --chat prompt: give --chat TEXT")
    rows = [_token_ids(text) for text in prompt_ids]
    errors = _runtime_errors()
    clock = time.perf_counter()
    with _user_errors(errors):
        art = load_artifact(artifact, verify="structure")
        names = list(Manifest.from_sections(art.manifest, art.path).tokenizer.files)
        if (prompts or chats) and not names:
            given = "--prompt" if prompts else "--chat"
            raise UserError(f"{artifact}: the artifact carries no tokenizer: give --prompt-ids instead of {given}")
        session = load(artifact, device)  # before transformers can import Triton (see runtime.loaded)
        tokenizer = _load_tokenizer(art) if names else None
        if tokenizer is not None and prompts:
            rows = [list(tokenizer(text)["input_ids"]) for text in prompts]
        if tokenizer is not None and chats:
            rows = [_chat_ids(tokenizer, text, system, artifact) for text in chats]
        click.echo(f"loaded {artifact} ({device}) in {time.perf_counter() - clock:.1f} s", err=True)
        clock = time.perf_counter()
        out = session.generate(rows, max_new_tokens, sampling=sampling, logprobs=logprobs)
    generated, lps = out if logprobs else (out, None)
    eos = set(session.info.eos_token_ids)
    results = []
    for i, (prompt, row) in enumerate(zip(rows, generated.tolist(), strict=True)):
        tokens = _until_eos(row, eos)
        entry: dict[str, Any] = {"prompt_ids": prompt, "tokens": tokens}
        if lps is not None:
            entry["logprobs"] = [round(float(v), 6) for v in lps[i, : len(tokens)]]
        if tokenizer is not None:
            entry["text"] = tokenizer.decode(tokens, skip_special_tokens=True)
        results.append(entry)
    click.echo(
        f"generated {sum(len(r['tokens']) for r in results)} tokens in {time.perf_counter() - clock:.1f} s", err=True
    )
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for i, r in enumerate(results):
        tag = f"[{i}] " if len(results) > 1 else ""
        click.echo(f"{tag}tokens: {' '.join(map(str, r['tokens']))}")
        if "logprobs" in r:
            click.echo(f"{tag}logprobs: {' '.join(f'{v:.4f}' for v in r['logprobs'])}")
        if "text" in r:
            click.echo(f"{tag}text: {r['text']!r}")


def _chat_ids(tokenizer: Any, text: str, system: str | None, artifact: str) -> list[int]:
    """The token ids of a conversation of ``system`` (where given) and the user's ``text``, with
    the assistant's turn opened (``serve.text.chat_ids``)."""
    from inferx.serve.text import TextError, chat_ids

    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": text}]
    try:
        return chat_ids(tokenizer, messages)
    except TextError as e:
        hint = ": give --prompt TEXT instead of --chat" if "no chat template" in str(e) else ""
        raise UserError(f"{artifact}: {e}{hint}") from None


def _token_ids(text: str) -> list[int]:
    ids = []
    for part in text.replace(" ", "").split(","):
        if not part.isdigit():
            raise UserError(f"--prompt-ids {text!r}: {part!r} is not a token id (want e.g. 1,2,3)")
        ids.append(int(part))
    return ids


def _until_eos(row: list[int], eos: set[int]) -> list[int]:
    """The row up to and including its first EOS (generate repeats it after that)."""
    for i, t in enumerate(row):
        if t in eos:
            return row[: i + 1]
    return row


def _load_tokenizer(art: Any) -> Any:
    """The artifact's tokenizer (``serve.text.artifact_tokenizer``), or None."""
    from inferx.serve.text import TextError, artifact_tokenizer

    try:
        return artifact_tokenizer(art)
    except TextError as e:
        raise UserError(str(e)) from None


# --- serve ----------------------------------------------------------------------------------


@main.command("serve")
@click.argument("artifact")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cuda", show_default=True)
@click.option("--rows", type=click.IntRange(min=1), default=None,
              help="Requests running at once (default: the artifact's --max-batch).")
@click.option("--prefill-chunk", type=click.IntRange(min=1), default=None,
              help="Prompt tokens a request prefills a step (default: whole prompts).")
@click.option("--model-name", default=None, help="The model's name in the API (default: the artifact's file name).")
def serve_command(artifact: str, host: str, port: int, device: str, rows: int | None, prefill_chunk: int | None,
                  model_name: str | None) -> None:
    """Serve ARTIFACT over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions,
    /v1/models, /health, /metrics), batching requests as they come. Needs the artifact's
    tokenizer and the serve extra (pip install 'inferx[serve]')."""
    try:
        import uvicorn

        from inferx.serve.app import build_app
    except ImportError as e:
        raise UserError(f"inferx serve needs the serve extra (pip install 'inferx[serve]'): {e}") from None
    from inferx.runtime.artifact import load_artifact
    from inferx.runtime.loaded import load

    with _user_errors(_runtime_errors()):
        art = load_artifact(artifact, verify="structure")
        session = load(artifact, device)  # before transformers can import Triton (see runtime.loaded)
        if rows is not None and rows > session.max_batch:
            raise UserError(f"--rows {rows}: the artifact runs at most {session.max_batch} sequences (--max-batch)")
        tokenizer = _load_tokenizer(art)
        if tokenizer is None:
            raise UserError(f"{artifact}: the artifact carries no tokenizer, which the HTTP API needs for its text")
        app = build_app(session, tokenizer, model_name or Path(artifact).name, rows, prefill_chunk)
    click.echo(f"serving {artifact} ({device}) on http://{host}:{port}/v1", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")


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


# --- bench-serve ----------------------------------------------------------------------------


def _length_range(text: str, option: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        a, b = int(lo), int(hi if sep else lo)
    except ValueError:
        raise UserError(f"{option} {text!r}: want LOW:HIGH or N, e.g. 128:512") from None
    if not 1 <= a <= b:
        raise UserError(f"{option} {text!r}: want 1 <= LOW <= HIGH")
    return a, b


@main.command("bench-serve")
@click.option("--shape", type=click.Choice(["1b", "8b"]), default="8b", show_default=True)
@click.option("--requests", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--rate", default="inf", show_default=True,
              help="Poisson arrivals, requests a second (inf: all at once).")
@click.option("--prompt-len", default="128:512", show_default=True, help="Prompt lengths LOW:HIGH (uniform).")
@click.option("--output-len", default="128:128", show_default=True, help="Output lengths LOW:HIGH (uniform).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rows", type=click.IntRange(min=1), default=64, show_default=True, help="Requests running at once.")
@click.option("--prefill-chunk", type=click.IntRange(min=1), default=None,
              help="Prompt tokens a request prefills a step.")
@click.option("--peers", default="generate_batch", show_default=True, help="generate_batch, or '' for none.")
@click.option("--workdir", default=None, help="Where the checkpoint and artifact go (default: a temporary directory).")
@click.option("--out", default=None, help="Write the results as JSON here.")
def bench_serve_command(shape: str, requests: int, rate: str, prompt_len: str, output_len: str, seed: int, rows: int,
                        prefill_chunk: int | None, peers: str, workdir: str | None, out: str | None) -> None:
    """A load of requests through InferX's serving engine and through transformers' continuous
    batching (generate_batch) in the same process, on a Llama shape with random bf16 weights on
    the GPU: throughput, TTFT and TPOT percentiles."""
    import torch

    from inferx.benchmark.serve_load import Load, bench_serve, table
    from inferx.benchmark.shapes import make_model

    if out is not None:
        _check_output_file(out, "--out")
    try:
        per_s = float(rate)
    except ValueError:
        raise UserError(f"--rate {rate!r}: want a number of requests a second, or inf") from None
    try:
        load = Load(requests, per_s, _length_range(prompt_len, "--prompt-len"),
                    _length_range(output_len, "--output-len"), seed)
    except ValueError as e:
        raise UserError(f"--rate {rate}: {e}") from None
    if not torch.cuda.is_available():
        raise UserError("bench-serve times the GPU: no CUDA device here")
    names = tuple(p for p in peers.split(",") if p.strip())

    def say(line: str) -> None:
        click.echo(line, err=True)

    with tempfile.TemporaryDirectory(prefix="inferx-bench-serve-") as tmp:
        model = make_model(shape, "cuda", torch.bfloat16, seed)
        with _user_errors(_runtime_errors() + (ValueError,)):
            result = bench_serve(model, Path(workdir or tmp), load, rows=rows, prefill_chunk=prefill_chunk,
                                 peers=names, say=say)
    result["shape"] = shape
    click.echo(table(result))
    if out is not None:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")


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
