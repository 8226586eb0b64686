"""InferX: an LLM compiler for NVIDIA Hopper GPUs.

Public API (design.md): ``import_model``; ``Program.reference_session()``; sessions with
``prefill``, ``decode``, ``generate`` (greedy, or as a ``SamplingParams`` says) and ``reset``;
``Engine`` (requests that come and go every step over a session's rows).
"""

from __future__ import annotations

from typing import Any


def import_model(src: Any, **options: Any):  # -> Program
    """See ``inferx.compiler.frontend.import_model``."""
    from inferx.compiler.frontend import import_model as _import

    return _import(src, **options)


def compile(src: Any, target: str = "h200", output: Any = None, **options: Any):  # -> pathlib.Path
    """Compiles ``src`` to an artifact at ``output`` (a directory, or a single file ending in .ixa).

    Options are the CLI's: ``dtype`` (fp32, fp16, bf16), ``max_seq_len``, ``max_batch``,
    ``dump_ir`` (a directory), ``progress`` (a callable taking a line), ``tuning_logs`` (the tuning
    database's root; None for heuristic schedules only), ``pdl`` (CUDA sessions launch with
    programmatic dependent launch unless told otherwise), ``overlap`` (under PDL, each kernel's
    weights start streaming as the one before it ends), ``fuse_mlp`` (each decode layer's MLP as
    one kernel, for ``max_batch`` up to 8), ``fuse_attention_o`` (each decode layer's attention and
    o projection as one kernel, for ``max_batch`` up to 8), ``quant`` (an int4 scheme such as
    "int4-g128" or "int4-g32-sym": every linear but the LM head quantized and run on int4 GEMM
    kernels; "gguf": a GGUF file's 4-bit linears kept as stored; "checkpoint": an HF GPTQ or AWQ
    checkpoint's int4 linears kept as stored, which such a checkpoint requires; "fp8": FP8 W8A8;
    "auto": the precision planner, within ``accuracy_budget``, a fraction such as 0.01),
    ``quant_method`` ("rtn", "awq" or "gptq"; the latter two calibrate on ``calibration``, a text
    file, by default CPython's documentation text), ``quant_head`` (the LM head quantized too),
    ``quant_overrides`` (``PATTERN=PRECISION`` rules), ``precision_map`` (a JSON file giving
    every linear's precision), ``write_precision_map`` (where to write the map used)."""
    import dataclasses
    from pathlib import Path

    from inferx.compiler.driver import compile_model
    from inferx.compiler.options import CompileError, CompileOptions

    if output is None:
        raise TypeError("compile() needs output=PATH")
    known = {f.name for f in dataclasses.fields(CompileOptions)} - {"target"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise CompileError(f"unknown option {unknown[0]!r}; the options are {', '.join(sorted(known))}")
    dump = options.pop("dump_ir", None)
    opts = CompileOptions(target=target, dump_ir=Path(dump) if dump else None, **options)
    return compile_model(src, Path(output), opts)


def load(artifact: Any, device: str = "cpu", **options: Any):  # -> Session
    """Loads an artifact and returns a Session on ``device`` ("cpu" or "cuda")."""
    from inferx.runtime.loaded import load as _load

    return _load(artifact, device, **options)


def __getattr__(name: str) -> Any:
    """``inferx.SamplingParams`` (``inferx.runtime.sampling``) and ``inferx.Engine``
    (``inferx.runtime.engine``), imported when first asked for."""
    if name == "SamplingParams":
        from inferx.runtime.sampling import SamplingParams

        return SamplingParams
    if name == "Engine":
        from inferx.runtime.engine import Engine

        return Engine
    raise AttributeError(f"module 'inferx' has no attribute {name!r}")
