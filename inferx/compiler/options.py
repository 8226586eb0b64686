"""What a compile is asked for: the target and the options every phase reads (one frozen object,
passed down), and the error a refused model or option raises."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from inferx.compiler.database import DEFAULT_ROOT
from inferx.compiler.ir.quant import SchemeError, parse_scheme

QUANT_METHODS = ("rtn", "awq", "gptq")
STORED = ("gguf", "checkpoint")  # quant values that keep a model's own 4-bit weights
FP8 = "fp8"  # the quant value of FP8 W8A8 (inferx.compiler.ir.fp8)
AUTO = "auto"  # the quant value of the precision planner (inferx.compiler.quant.planner)
FP8_ACTIVATIONS = ("dynamic", "minmax", "percentile", "entropy")
KV_DTYPES = (None, "fp8")  # the KV cache: the model's dtype, or E4M3 with per-head scales

TARGETS = {"h200": "sm_90", "h100": "sm_90", "sm_90": "sm_90", "cpu": "cpu"}
DTYPES = ("fp32", "fp16", "bf16")
_DTYPE_ALIASES = ("f32", "f16")  # the IR's spellings, accepted from the Python API
DEFAULT_MAX_SEQ_LEN = 2048
# Bounds on what a compile plans for, far above any real deployment: a typo such as an extra
# digit is refused at once instead of sizing memory plans and buffers from it.
MAX_BATCH = 1 << 16
MAX_SEQ_LEN = 1 << 24
MAX_JOBS = 1024
MAX_KV_BLOCKS = 1 << 24


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
    # Quantize the program's linears (all but the LM head) to this int4 scheme after import
    # (``inferx.compiler.ir.quant``: int4-g128, -g64, -g32, optionally -sym), by ``quant_method``;
    # they run on the int4 GEMM kernels. "gguf": a GGUF file's 4-bit linears (Q4_0, Q4_1, Q4_K)
    # kept as the file stores them. "checkpoint": an HF checkpoint's GPTQ or AWQ int4 linears kept
    # as it stores them (such a checkpoint takes nothing else). "fp8": FP8 W8A8, E4M3 weights with
    # a scale per output channel, activations quantized per token in the GEMM (round-to-nearest;
    # ``quant_head`` applies). "auto": the precision planner picks each linear's precision among
    # float, fp8 and int4 within ``accuracy_budget`` (``inferx.compiler.quant.planner``). None: the
    # weights stay in the program's dtype (or as ``precision_map`` says).
    quant: str | None = None
    # quant "auto": the perplexity increase allowed over the float model, as a fraction (0.01: 1%),
    # measured on ``calibration`` text (CPython's documentation text when None).
    accuracy_budget: float | None = None
    # A precision map file (JSON, ``inferx.compiler.quant.precision``): every linear's precision,
    # as the planner writes it or a user edits it. Takes no quant.
    precision_map: Path | None = None
    # FP8 linears' activation scales: "dynamic" (each token its own, in the GEMM), or one static
    # scale per input calibrated on ``calibration`` text by an observer: "minmax", "percentile"
    # (99.99%) or "entropy" (``inferx.compiler.quant.observers``).
    fp8_activations: str = "dynamic"
    # SmoothQuant's alpha (0..1) for the inputs FP8 linears alone read, calibrated likewise
    # (``inferx.compiler.quant.smooth``); None: no migration.
    smoothquant: float | None = None
    # FP8 GEMMs read x quantized once by a kernel of its own (the fp8-inputs pass, the fp8quant
    # family) instead of quantizing it in every column tile: a prompt's (3.4x faster GEMMs at 4096
    # rows, docs/performance.md, "x quantized once"), and, with ``fp8_decode_min_batch``, a decode
    # step's in the batch buckets of that many rows and more (below, the quantizing kernel's
    # launch is left out and the GEMMs quantize x in their tiles: at small batches a launch more
    # costs more than quantizing a few rows in each tile). None: decode GEMMs always quantize in
    # their tiles (the default until the decode form is timed on a GPU).
    fp8_inputs_once: bool = True
    fp8_decode_min_batch: int | None = None
    # The KV cache's element type: None keeps the model's dtype; "fp8" stores keys and values as
    # E4M3 with one static scale per KV head and layer, calibrated on ``calibration`` text
    # (``inferx.compiler.quant.kv``): half the bytes attention reads.
    kv_dtype: str | None = None
    # With kv_dtype "fp8": one scale for every KV head and layer instead of calibrating (no text
    # read): keys and values past 448 x kv_scale saturate. For models whose range is known, and
    # for timing models with random weights.
    kv_scale: float | None = None
    # A paged KV cache (inferx.passes.page_kv): each layer's keys and values in a pool of
    # ``kv_blocks`` blocks of ``kv_block_size`` positions, each sequence's blocks named by a block
    # table the runtime fills (the serving engine shares prompt prefixes' blocks and admits
    # requests by the blocks free). None: one contiguous cache row per sequence at the compiled
    # context. ``kv_blocks`` None: as many as max_batch sequences at max_seq_len take.
    kv_block_size: int | None = None
    kv_blocks: int | None = None
    # Where to write the precision map the compile used (JSON; with quant "auto", the plan and what
    # the planner measured), once the artifact is written. None: not written.
    write_precision_map: Path | None = None
    # rtn (round-to-nearest), awq or gptq; the last two calibrate on ``calibration`` (a text file;
    # None: CPython's documentation text, ``pydoc_data.topics``) run through the float model.
    quant_method: str = "rtn"
    calibration: Path | None = None
    # The LM head quantized too (a scheme's quant only): it is the largest single weight of a small
    # model, and the one whose rounding shows most in the logits.
    quant_head: bool = False
    # Per-layer overrides of an int4 scheme's or fp8's quant, each "PATTERN=PRECISION" (float, fp8
    # or an int4 scheme; fnmatch on weight names, the first match wins): e.g.
    # ("*down_proj*=int4-g32", "*layers.0.*=float", "*q_proj*=fp8").
    quant_overrides: tuple[str, ...] = ()
    # Past 128 rows a prompt's int4 GEMMs read their weights dequantized once per launch into a
    # buffer of the program's dtype, which costs that buffer (the largest int4 weight at two bytes
    # an element) per prompt bucket; off, they unpack codes in every tile (slower for long
    # prompts: docs/performance.md). GPU schedules only (the cpu target's unpack codes).
    dense_prompt_weights: bool = True

    def __post_init__(self) -> None:
        # a path given as a string
        for name in ("dump_ir", "tuning_logs", "calibration", "precision_map", "write_precision_map"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, Path(getattr(self, name)))
        if isinstance(self.quant_overrides, list):
            object.__setattr__(self, "quant_overrides", tuple(self.quant_overrides))
        problem = _problem(self)
        if problem:
            raise CompileError(problem)


def _int_problem(name: str, value: object, bound: int, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if type(value) is not int:
        return f"{name} must be an integer, got {value!r}"
    if not 1 <= value <= bound:
        return f"{name} must be between 1 and {bound}, got {value}"
    return None


def _problem(o: CompileOptions) -> str | None:
    """The first option that is not valid, said with its value; None when all are. The one check
    of compile options: the CLI, ``inferx.compile`` and the driver all build a CompileOptions."""
    if not isinstance(o.target, str) or o.target not in TARGETS:
        return f"unknown target {o.target!r}: the targets are {', '.join(TARGETS)}"
    if o.dtype is not None and o.dtype not in DTYPES + _DTYPE_ALIASES:
        return f"unknown dtype {o.dtype!r}: the dtypes are {', '.join(DTYPES)}"
    if o.quant is not None and o.quant not in (*STORED, FP8, AUTO):
        try:
            if not isinstance(o.quant, str):
                raise SchemeError(o.quant)
            parse_scheme(o.quant)
        except SchemeError:
            return (f"unknown quant scheme {o.quant!r}: the schemes are int4-g128, int4-g64 and int4-g32, "
                    "each optionally with -sym, gguf (a GGUF file's 4-bit weights as stored), checkpoint "
                    "(an HF GPTQ or AWQ checkpoint's int4 weights as stored), fp8 (FP8 W8A8) and auto "
                    "(the precision planner, with an accuracy budget)")
    if o.quant_method not in QUANT_METHODS:
        return f"unknown quant method {o.quant_method!r}: the methods are {', '.join(QUANT_METHODS)}"
    scheme = o.quant is not None and o.quant not in (*STORED, FP8, AUTO)
    if isinstance(o.quant_overrides, str) or not all(isinstance(r, str) for r in o.quant_overrides):
        return f"quant_overrides must be a sequence of PATTERN=PRECISION strings, got {o.quant_overrides!r}"
    from inferx.compiler.quant.precision import PrecisionError, parse_rules

    try:
        parse_rules(o.quant_overrides)
    except PrecisionError as e:
        return f"quant_overrides: {e}"
    for name in ("precision_map", "write_precision_map"):
        if getattr(o, name) is not None and not isinstance(getattr(o, name), Path):
            return f"{name} must be a pathlib.Path or None, got {getattr(o, name)!r}"
    if o.precision_map is not None:
        if o.quant is not None:
            return f"precision_map gives every linear's precision: it takes no quant (got quant {o.quant})"
    if o.quant == AUTO:
        b = o.accuracy_budget
        if b is None:
            return "accuracy_budget: quant auto plans within an accuracy budget: give one (0.01 for 1% perplexity)"
        if isinstance(b, bool) or not isinstance(b, (int, float)) or not 0 < b <= 1:
            return f"accuracy_budget must be a fraction in (0, 1] (0.01 for 1%), got {b!r}"
    elif o.accuracy_budget is not None:
        return f"accuracy_budget applies to quant auto (the precision planner), not to quant {o.quant}"
    if o.kv_dtype not in KV_DTYPES:
        return f"unknown kv_dtype {o.kv_dtype!r}: the choices are fp8, or None for the model's dtype"
    if o.kv_scale is not None:
        if o.kv_dtype is None:
            return "kv_scale is the scale of an FP8 KV cache: give kv_dtype fp8 with it"
        v = o.kv_scale
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            return f"kv_scale must be a positive number, got {v!r}"
    if o.kv_blocks is not None and o.kv_block_size is None:
        return "kv_blocks is the size of a paged KV cache's pool: give kv_block_size with it"
    for problem in (_int_problem("kv_block_size", o.kv_block_size, MAX_SEQ_LEN, optional=True),
                    _int_problem("kv_blocks", o.kv_blocks, MAX_KV_BLOCKS, optional=True)):
        if problem:
            return problem
    b = o.fp8_decode_min_batch
    if b is not None and (isinstance(b, bool) or not isinstance(b, int) or b < 1):
        return f"fp8_decode_min_batch must be a batch of 1 or more (or None), got {b!r}"
    if o.fp8_activations not in FP8_ACTIVATIONS:
        return f"unknown fp8_activations {o.fp8_activations!r}: the choices are {', '.join(FP8_ACTIVATIONS)}"
    if o.smoothquant is not None and (isinstance(o.smoothquant, bool) or not isinstance(o.smoothquant, (int, float))
                                      or not 0 <= o.smoothquant <= 1):
        return f"smoothquant must be an alpha in [0, 1], got {o.smoothquant!r}"
    fp8_possible = o.quant == FP8 or o.precision_map is not None or (scheme and bool(o.quant_overrides))
    for what, on in (("fp8_activations", o.fp8_activations != "dynamic"), ("smoothquant", o.smoothquant is not None)):
        if on and not fp8_possible:
            return (f"{what} applies to FP8 linears (quant fp8, a precision map, or fp8 overrides), "
                    f"not to quant {o.quant}")
    for what, on, allowed, takes in (
        ("quant_method", o.quant_method != "rtn", scheme or (fp8_possible and o.quant_method == "gptq"),
         "an int4 scheme's quant, such as int4-g128, or gptq with FP8 linears"),
        ("quant_head", o.quant_head, scheme or o.quant in (FP8, AUTO), "an int4 scheme's quant, fp8 or auto"),
        ("calibration", o.calibration is not None,
         scheme or o.quant == AUTO or o.fp8_activations != "dynamic" or o.smoothquant is not None
         or o.quant_method != "rtn" or (o.kv_dtype is not None and o.kv_scale is None),
         "an int4 scheme's quant, auto, static fp8 activations, smoothquant or an fp8 KV cache without kv_scale"),
        ("quant_overrides", bool(o.quant_overrides), scheme or o.quant == FP8, "an int4 scheme's quant or fp8"),
    ):
        if on and not allowed:
            return f"{what} does not apply to quant {o.quant} (it takes {takes})"
    if o.schedules is not None and o.schedules not in TARGETS:
        return f"unknown schedules target {o.schedules!r}: the targets are {', '.join(TARGETS)}"
    for problem in (
        _int_problem("max_batch", o.max_batch, MAX_BATCH),
        _int_problem("max_seq_len", o.max_seq_len, MAX_SEQ_LEN, optional=True),
        _int_problem("jobs", o.jobs, MAX_JOBS),
    ):
        if problem:
            return problem
    for name in ("pdl", "overlap", "fuse_mlp", "fuse_attention_o", "dense_prompt_weights"):
        if not isinstance(getattr(o, name), bool):
            return f"{name} must be True or False, got {getattr(o, name)!r}"
    for name in ("dump_ir", "tuning_logs"):
        if getattr(o, name) is not None and not isinstance(getattr(o, name), Path):
            return f"{name} must be a pathlib.Path or None, got {getattr(o, name)!r}"
    if o.progress is not None and not callable(o.progress):
        return f"progress must be a callable taking a line, got {o.progress!r}"
    return None


def batch_buckets(options: CompileOptions) -> list[int]:
    """The batch buckets a compile plans and generates decode kernels for."""
    return sorted({b for b in (1, 4, 16, 64) if b < options.max_batch} | {options.max_batch})


def resolved_max_seq_len(options: CompileOptions) -> int:
    """``options.max_seq_len`` once ``compile_model`` has resolved it from the model's context: the
    phases after import read it through here."""
    if options.max_seq_len is None:
        raise TypeError("max_seq_len is read before compile_model resolved it from the model's context")
    return options.max_seq_len
