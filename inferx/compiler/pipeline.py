"""The one compile pipeline: its phases as pass-pipeline strings, and the registry of every pass
(the IR passes, bind-families, and the passes kernel families bring). ``compile``, ``tune``,
``inferx opt`` and the tests all run it from here.

    (quantize     with ``quant``: the linears made ix.qlinear over int4 weights, see ``quantize``)
    cleanup       canonicalize, cse, dce
    merge-gemms   q/k/v and gate/up become one GEMM each (weights concatenated; int4 codes,
                  scales and minimums of qlinears likewise), float gate|up with its rows
                  interleaved (interleave-pairs); RMSNorm scales move into the weights of the
                  float GEMMs they feed (fold-norm-weights)
    fuse          every run-time op into an ix.kernel bound to its kernel family (5 per decoder
                  layer, int4 linears too; in decode one fewer with each fused decode template
                  asked for), the norm statistics computed by the kernels that produce their inputs
    plan-memory   dynamic RoPE settled for the compiled context; a prompt's int4 GEMMs given
                  weights dequantized once per launch (dense-prompt-weights); one arena per
                  shape bucket
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from xdsl.dialects.func import FuncOp
from xdsl.passes import ModulePass

from inferx.compiler.families import families
from inferx.compiler.families.bind_families import BindFamilies
from inferx.compiler.ir.ops_kernel import KernelOp
from inferx.compiler.ir.ops_nn import QLinearOp
from inferx.compiler.options import TARGETS, CompileError, CompileOptions, batch_buckets, resolved_max_seq_len
from inferx.passes import registry as ir_passes
from inferx.passes.pipeline import PassManager, parse
from inferx.passes.settle_dynamic_rope import RopeLengthError
from inferx.program import Program


def registry() -> dict[str, type[ModulePass]]:
    """Every pass by its pipeline name: the IR passes, bind-families, and each family's own."""
    out = dict(ir_passes())
    out[BindFamilies.name] = BindFamilies
    for f in families():
        for p in f.passes():
            out[p.name] = p
    return out


# Option flags that ask for a fused decode template, and the pass that makes it.
FUSED_DECODE = {"fuse_mlp": "fuse-decode-mlp", "fuse_attention_o": "fuse-decode-attention-o"}
FUSE = "fuse,bind-families,norm-stats"


def phases(options: CompileOptions) -> list[tuple[str, str]]:
    """(name, pipeline) of each IR phase, in order. plan-memory plans for ``max_seq_len``, so it is
    there once that is resolved (``compile_model`` resolves it after import; the tuner's task
    extraction stops before plan-memory)."""
    fused = "".join(f",{p}" for flag, p in FUSED_DECODE.items() if getattr(options, flag))
    out = [
        ("cleanup", "canonicalize,cse,dce"),
        ("merge-gemms", "merge-gemms,interleave-pairs,fold-norm-weights,dce"),
        ("fuse", FUSE + fused),
    ]
    if options.max_seq_len is not None:
        rope = f"settle-dynamic-rope{{max-seq-len={options.max_seq_len}}}"
        out.append(("plan-memory", f"{rope},{dense_weights(options)}{plan_pipeline(options)}"))
    return out


# A prompt's int4 GEMMs read a dense weight from this many rows (past the qgemm row bucket of
# 128): below, dequantizing the weight costs more than unpacking it in the tiles
# (docs/performance.md). On the cpu target (one kernel for every shape) from the first row.
DENSE_MIN_ROWS = 129


def dense_weights(options: CompileOptions) -> str:
    """The dense-prompt-weights pass, with its separator, where asked for and prompts may reach
    its rows."""
    if not options.dense_prompt_weights:
        return ""
    if (options.schedules or options.target) == "cpu":
        return "dense-prompt-weights{min-rows=1},"
    if resolved_max_seq_len(options) < DENSE_MIN_ROWS:
        return ""
    return f"dense-prompt-weights{{min-rows={DENSE_MIN_ROWS}}},"


def run(spec: str, program: Program) -> None:
    """Runs a pipeline string on the program's module; a model the passes refuse is a CompileError."""
    try:
        PassManager(parse(spec, registry())).run(program.module)
    except RopeLengthError as e:
        raise CompileError(str(e)) from None

def plan_pipeline(options: CompileOptions) -> str:
    batch = batch_buckets(options)
    n = resolved_max_seq_len(options)
    seq = sorted({s for s in (1, 512, 2048) if s < n} | {n})
    return f"plan-memory{{batch={','.join(map(str, batch))} seq={','.join(map(str, seq))} max-ctx={n}}}"


def check_fused(program: Program, options: CompileOptions) -> None:
    """With a fused decode template asked for, the decode entry must have that fused kernel for
    every decoder layer: else the model's layers are not ones the template implements, and the
    compile stops saying so."""
    info = program.info
    assert info is not None
    decode = next(f for f in program.module.ops if isinstance(f, FuncOp) and f.sym_name.data == "decode")
    for flag, pass_name in FUSED_DECODE.items():
        if not getattr(options, flag):
            continue
        fam = next(f for f in families() if any(p.name == pass_name for p in f.passes()))
        fused = sum(1 for o in decode.body.block.ops if isinstance(o, KernelOp) and o.template.data == fam.name)
        if fused != info.num_layers:
            int4 = any(isinstance(op, QLinearOp) for op in decode.walk())
            hint = "; int4 linears (ix.qlinear) run on kernels of their own, which it does not fuse" if int4 else ""
            raise CompileError(f"{flag}: {fused} of the {info.num_layers} {fam.fuses} fused; the {fam.name} template "
                               f"takes {fam.takes}{hint}")


def import_program(src: Any, options: CompileOptions) -> Program:
    """The Program of ``src`` (a path, a transformers model...) in the dtype ``options`` asks for; with
    none asked, the checkpoint's, except that a float32 model for a GPU target imports in bf16 (its
    kernels run bf16 and fp16), which the progress output says. A GPTQ or AWQ checkpoint (config.json's
    quantization_config) compiles with quant "checkpoint" alone: else CompileError, before any work."""
    from inferx.compiler.frontend import import_model
    from inferx.compiler.frontend.hf import quantization_method

    dtype = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", None: None}.get(options.dtype, options.dtype)
    method = quantization_method(Path(src)) if isinstance(src, (str, Path)) else None
    if method is not None and options.quant != "checkpoint":
        again = "" if options.quant is None else f" to quantize again ({options.quant})"
        raise CompileError(f"{src}: config.json's quantization_config says the checkpoint is quantized "
                           f"({method}): pass quant='checkpoint' (--quant checkpoint) to keep its int4 weights; "
                           f"InferX does not dequantize them to float{again}")
    program = import_model(src, **({"dtype": dtype} if dtype else {}))
    gpu = TARGETS.get(options.target, "cpu") != "cpu"
    if dtype is None and gpu and program.info is not None and program.info.dtype == "f32":
        if options.progress is not None:
            options.progress("        dtype bf16 (the checkpoint is float32; --dtype to choose)")
        program = import_model(src, dtype="bf16")
    return program


def quantize(program: Program, options: CompileOptions, source: Any = None) -> Program:
    """With ``options.quant``, ``program``'s linears (all but the LM head) made ``ix.qlinear``
    under that scheme (the quantize pass) and its weights a store that serves their codes, scales
    and minimums (``quant.store.quantize_program``, round-to-nearest); with "gguf", the 4-bit
    linears of the GGUF file ``source`` kept as stored (``quant.store.keep_gguf_quantized``);
    with "checkpoint", the int4 linears of the GPTQ or AWQ checkpoint directory ``source`` kept
    as stored (``quant.store.keep_checkpoint_quantized``); else ``program`` as it is.
    Runs on the imported program, before cleanup: merge-gemms then merges q|k|v and gate|up
    qlinears as it merges linears; interleave-pairs and fold-norm-weights match ``ix.linear``
    alone (a qgemm kernel applies its norm's weight itself)."""
    if options.quant is None:
        return program
    from inferx.compiler.ir.quant import SchemeError
    from inferx.compiler.ir.textio import IRError
    from inferx.compiler.quant.store import keep_checkpoint_quantized, keep_gguf_quantized, quantize_program

    if options.quant == "gguf":
        path = Path(source) if isinstance(source, (str, Path)) else None
        if path is None or path.suffix.lower() != ".gguf":
            what = str(path) if path is not None else f"a {type(source).__name__}"
            raise CompileError(f"quant gguf keeps a GGUF file's 4-bit weights: the model ({what}) is not a .gguf file")
        return keep_gguf_quantized(program, path)
    if options.quant == "checkpoint":
        path = Path(source) if isinstance(source, (str, Path)) else None
        if path is None or not path.is_dir():
            what = str(path) if path is not None else f"a {type(source).__name__}"
            raise CompileError(f"quant checkpoint keeps an HF checkpoint's GPTQ or AWQ int4 weights: the model "
                               f"({what}) is not an HF checkpoint directory")
        return keep_checkpoint_quantized(program, path)
    try:
        overrides = ",".join(options.quant_overrides)
        if options.quant_method == "rtn":
            return quantize_program(program, options.quant, head=options.quant_head, overrides=overrides)
        from inferx.compiler.quant.store import quantize_calibrated

        windows = calibration_windows(program, options, source)
        if options.progress is not None:
            options.progress(f"        calibrating {options.quant_method} on {len(windows)} windows of "
                             f"{len(windows[0])} tokens of {options.calibration or 'pydoc_data.topics'}")
        # GPTQ with act-order and damp 0.1: what held up on text unlike the calibration text
        # (docs/performance.md, "int4 accuracy")
        return quantize_calibrated(program, options.quant, options.quant_method, windows, head=options.quant_head,
                                   act_order=True, damp=GPTQ_DAMP, overrides=overrides)
    except (IRError, SchemeError) as e:
        raise CompileError(f"quant {options.quant}: {e}") from None


CALIBRATION_WINDOW = 256  # tokens a calibration window holds: one prefill each
CALIBRATION_WINDOWS = 32  # 8 overfit GPTQ to the calibration text (docs/performance.md)
GPTQ_DAMP = 0.1


def calibration_windows(program: Program, options: CompileOptions, source: Any = None) -> list[list[int]]:
    """Windows of token ids the calibrated methods run through the float model: the text of
    ``options.calibration`` (CPython's documentation text when None) tokenized by the program's
    tokenizer (or that of the HF checkpoint directory ``source``) and cut into CALIBRATION_WINDOWS
    windows of CALIBRATION_WINDOW tokens, or of the model's context where that is shorter (fewer
    windows where the text is short, at least one).
    CompileError without a tokenizer or text enough."""
    tokenizer = program.tokenizer
    if tokenizer is None and isinstance(source, (str, Path)) and Path(source).is_dir():
        tokenizer = _checkpoint_tokenizer(Path(source))
    if tokenizer is None:
        raise CompileError(f"quant method {options.quant_method} calibrates on text: the model has no tokenizer")
    if options.calibration is None:
        import pydoc_data.topics

        text = "\n\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))
    else:
        try:
            text = Path(options.calibration).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise CompileError(f"calibration {options.calibration}: cannot be read as UTF-8 text ({e})") from None
    ids = list(tokenizer(text)["input_ids"])  # type: ignore[operator]
    step = min(CALIBRATION_WINDOW, program.info.max_context) if program.info is not None else CALIBRATION_WINDOW
    if len(ids) < step:
        raise CompileError(f"calibration {options.calibration}: {len(ids)} tokens, fewer than one window of {step}")
    return [ids[i : i + step] for i in range(0, len(ids) - step + 1, step)][:CALIBRATION_WINDOWS]


def _checkpoint_tokenizer(path: Path) -> Any:
    """The tokenizer an HF checkpoint directory holds (tokenizer.json or the files of a slow
    tokenizer), read from disk alone; None where it holds none."""
    if not any((path / f).is_file() for f in ("tokenizer.json", "tokenizer.model", "vocab.json")):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as e:
        raise CompileError(f"{path}: its tokenizer cannot be read ({' '.join(str(e).split())[:200]})") from None


def dump(options: CompileOptions, name: str, program: Program) -> None:
    if options.dump_ir is not None:
        options.dump_ir.mkdir(parents=True, exist_ok=True)
        (options.dump_ir / f"{name}.mlir").write_text(str(program.module) + "\n")
