"""Model shapes for the benchmark, and checkpoints with random weights made on the device.

``SHAPES`` holds the HF ``config.json`` values of Llama-3.2-1B and Llama-3-8B (and a tiny shape
for tests); only the weights are random. ``make_model`` builds the HF model directly on the
device, so a multi-GB model never crosses the network or the host's memory twice;
``save_checkpoint`` writes it as an HF checkpoint directory (config.json + safetensors shards)
for the compiler. ``plain_gemm_module`` holds a shape's four projections as bare products (no
norm, RoPE, residual or activation folded in): the GEMMs cuBLAS computes, tuned like the model's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LLAMA3_ROPE_SCALING = {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"}

# HF config.json values (architectures, model_type and torch_dtype are added by make_config).
SHAPES: dict[str, dict[str, Any]] = {
    "1b": dict(  # meta-llama/Llama-3.2-1B
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, hidden_act="silu",
        max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling=LLAMA3_ROPE_SCALING, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        bos_token_id=128000, eos_token_id=128001,
    ),
    "8b": dict(  # meta-llama/Meta-Llama-3-8B
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, hidden_act="silu",
        max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling=None,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        bos_token_id=128000, eos_token_id=128001,
    ),
    "tiny": dict(  # for tests: every feature of the 1B shape (GQA, llama3 RoPE, tied head), small
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_act="silu",
        max_position_embeddings=16384, rms_norm_eps=1e-5, rope_theta=500000.0,
        rope_scaling=LLAMA3_ROPE_SCALING, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        bos_token_id=0, eos_token_id=1,
    ),
}

LONG_NAMES = {"1b": "Llama-3.2-1B", "8b": "Llama-3-8B", "tiny": "tiny-llama"}


def make_config(shape: str, layers: int | None = None) -> Any:
    """The ``transformers.LlamaConfig`` of ``shape`` (a key of SHAPES), with ``layers`` decoder layers
    where given (a slice of the model for per-layer probes); ValueError names the shapes."""
    import transformers

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}: the shapes are {', '.join(SHAPES)}")
    values = dict(SHAPES[shape], **({"num_hidden_layers": layers} if layers is not None else {}))
    return transformers.LlamaConfig(architectures=["LlamaForCausalLM"], **values)


def projections(shape: str) -> dict[str, tuple[int, int]]:
    """The (N, K) of each projection of a decoder layer of ``shape``: qkv, o, gate_up (gate and
    up as one [2I, H] weight, as the compiler merges them) and down."""
    from inferx.benchmark.roofline import Dims

    d = Dims.of(make_config(shape))
    qkv = (d.heads + 2 * d.kv_heads) * d.head_dim
    return {"qkv": (qkv, d.hidden), "o": (d.hidden, d.hidden), "gate_up": (2 * d.intermediate, d.hidden),
            "down": (d.hidden, d.intermediate)}


def plain_gemm_module(shape: str, dtype: str = "bf16") -> Any:
    """A module whose ``@prefill`` (rows ``batch x seq``) and ``@decode`` (``batch x 1``) each
    compute ``shape``'s four projections as bare products ``y = x @ W^T``, each from its own input
    (so no two merge): after the fuse pass, one GEMM kernel per projection with no prologue or
    epilogue, whose tuning tasks are the plain GEMMs of those shapes."""
    from xdsl.dialects.builtin import ModuleOp, StringAttr

    from inferx.compiler.ir import ops_nn as nn
    from inferx.compiler.ir import ops_tensor as t
    from inferx.compiler.ir.builder import FuncBuilder
    from inferx.compiler.ir.symbolic import sym
    from inferx.compiler.ir.types import TensorType

    dims = projections(shape)
    funcs = []
    for entry, seq in (("prefill", sym("seq")), ("decode", 1)):
        fb = FuncBuilder(entry, [(f"x_{name}", TensorType([sym("batch"), seq, k], dtype))
                                 for name, (_, k) in dims.items()])
        outs = []
        for name, (n, k) in dims.items():
            w = fb.op(t.WeightOp, result_types=[TensorType([n, k], dtype)], name=StringAttr(f"{name}.weight"))
            outs.append(fb.op(nn.LinearOp, fb.arg(f"x_{name}"), w, None, hint=name))
        funcs.append(fb.finish(outs))
    return ModuleOp(funcs)


def shape_tasks(shape: str, max_seq_len: int, batches: tuple[int, ...] = (1,), only: tuple[str, ...] = (),
                skip: tuple[str, ...] = (), plain: bool = False) -> list[Any]:
    """The bf16 tuning tasks (``extract.TuningTask``) of a bench shape's model, compiled for
    ``max_seq_len`` and the decode ``batches``, whose line contains every text of ``only`` and none
    of ``skip`` (the filters of the tuning scripts in ``benchmarks/``). With ``plain``, those of
    ``plain_gemm_module(shape)`` instead: its projections as bare GEMMs."""
    import tempfile

    from inferx.autotune.extract import extract_tasks, fused_module

    if plain:
        module = fused_module(plain_gemm_module(shape))
    else:
        with tempfile.TemporaryDirectory() as d:
            make_config(shape).save_pretrained(d)
            module = fused_module(d, "bf16")
    tasks = extract_tasks(module, max_seq_len, batches=batches).tasks
    return [t for t in tasks if all(o in str(t.task) for o in only) and not any(s in str(t.task) for s in skip)]


def make_model(shape: str, device: str, dtype: Any, seed: int = 0, layers: int | None = None) -> Any:
    """A ``LlamaForCausalLM`` of ``shape`` in eval mode on ``device``, built there in ``dtype``:
    matrices and embeddings drawn from N(0, 0.02^2) by a generator seeded with ``seed`` on the
    device (the same seed gives the same weights on the same device), norm weights one."""
    import torch
    import transformers

    config = make_config(shape, layers)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), torch.no_grad():
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for _, p in sorted(model.named_parameters()):  # tied weights appear once
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=gen)
    return model.eval()


def save_checkpoint(model: Any, directory: Path) -> Path:
    """Writes ``model`` as an HF checkpoint (config.json + safetensors shards) into ``directory``
    and returns it. A file ``.complete`` is written last, so a directory holding it is whole."""
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory, max_shard_size="5GB")
    (directory / ".complete").write_text("ok\n")
    return directory


def is_complete(directory: Path) -> bool:
    """Whether ``directory`` holds a checkpoint or artifact that finished writing (see save_checkpoint)."""
    return (directory / ".complete").is_file()
