"""Importing HuggingFace decoder LLMs: a checkpoint directory or a ``transformers`` model object.

Everything is checked before heavy work: the directory and its config.json, the architecture,
every weight the IR names (present, and of the shape the config implies). Weights stay in their
files (memory-mapped on access); importing reads the config and the safetensors headers only.
A checkpoint quantized by GPTQ or AWQ imports with its int4 linears seen as float weights,
dequantized when read (``checkpoint_store``); compiling keeps them int4 (``quant="checkpoint"``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from inferx.compiler.frontend.tokenizer import hf_dir_tokenizer
from inferx.compiler.frontend.weights import CastStore, SafetensorsStore, WeightError
from inferx.compiler.ir.ops_tensor import WeightOp
from inferx.compiler.ir.types import TensorType
from inferx.models.config import DecoderConfig
from inferx.models.decoder import build_decoder_module
from inferx.models.registry import decoder_config
from inferx.program import Program
from inferx.runtime.model_info import ModelInfo

_STORAGE: dict[str, type[np.floating[Any]]] = {"f32": np.float32, "f16": np.float16, "bf16": np.float32}


class ModelImportError(ValueError):
    """A checkpoint that cannot be imported; the message names the file and the key."""


def import_hf_dir(path: Path, *, dtype: str | None = None) -> Program:
    if not path.is_dir():
        raise ModelImportError(f"{path}: not a directory")
    config_path = path / "config.json"
    if not config_path.is_file():
        raise ModelImportError(f"{path}: no config.json (is this a HuggingFace model directory?)")
    raw = read_json_object(config_path)
    cfg = with_dtype(decoder_config(raw, str(config_path)), dtype)
    program = decoder_program(cfg, checkpoint_store(path, raw), str(path))
    program.tokenizer = hf_dir_tokenizer(path)
    return program


def checkpoint_store(path: Path, raw: Mapping[str, Any]) -> Mapping[str, np.ndarray]:
    """The weights of the checkpoint directory ``path`` whose config.json holds ``raw``: its
    safetensors files (or the shards its index names). A checkpoint quantized by GPTQ or AWQ
    (``quantization_config``) is read through ``hf_int4.CheckpointInt4``: each int4 linear seen
    as a float ``<prefix>.weight`` (dequantized when read; ``quant="checkpoint"`` keeps it int4),
    a layout InferX does not read refused here, naming the config field or tensor."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        weight_map = _index_shards(path, index)
        store = SafetensorsStore.open(sorted(set(weight_map.values())))
        _check_weight_map(index, weight_map, store)
    else:
        store = SafetensorsStore.open(_weight_files(path))
    if "quantization_config" not in raw:
        return store
    from inferx.compiler.quant.hf_int4 import CheckpointInt4, quant_config

    return CheckpointInt4(store, quant_config(raw, str(path / "config.json")))


def quantization_method(path: Path) -> str | None:
    """The ``quant_method`` of the HF checkpoint directory ``path``'s quantization_config ("?"
    where it names none), or None for a checkpoint that is not quantized (or no HF directory)."""
    config = path / "config.json"
    if not path.is_dir() or not config.is_file():
        return None
    qc = read_json_object(config).get("quantization_config")
    if qc is None:
        return None
    return str(qc.get("quant_method", "?")) if isinstance(qc, dict) else "?"


def import_hf_model(model: Any, *, dtype: str | None = None) -> Program:
    """A ``transformers`` model object; its state dict is viewed as numpy arrays (float32 storage)."""
    raw = model.config.to_dict()
    raw.setdefault("model_type", getattr(model.config, "model_type", None))
    cfg = with_dtype(decoder_config(raw, f"{type(model).__name__}.config"), dtype)
    return decoder_program(cfg, _TorchStateStore(model.state_dict()), type(model).__name__)


def with_dtype(cfg: DecoderConfig, dtype: str | None) -> DecoderConfig:
    from dataclasses import replace

    if dtype is None:
        return cfg
    if dtype not in _STORAGE:
        raise ModelImportError(f"dtype {dtype!r} is not supported (f32, f16, bf16)")
    return replace(cfg, dtype=dtype)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (config.json, the shard index): anything else names the file."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelImportError(f"{path}: not UTF-8 text (byte {e.start})") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelImportError(f"{path}: not valid JSON: {e}") from None
    except RecursionError:
        raise ModelImportError(f"{path}: not valid JSON: nested too deeply") from None
    if not isinstance(raw, dict):
        raise ModelImportError(f"{path}: expected a JSON object, found {_json_kind(raw)}")
    return raw


def _json_kind(value: Any) -> str:
    kinds = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else kinds.get(type(value), type(value).__name__)


def _weight_files(path: Path) -> list[Path]:
    files = sorted(path.glob("*.safetensors"))
    if not files:
        other = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.pt")]
        hint = f" (found {', '.join(other)}: re-save with safe_serialization=True)" if other else ""
        raise ModelImportError(f"{path}: no .safetensors weights{hint}")
    return files


def _index_shards(path: Path, index: Path) -> dict[str, Path]:
    """{tensor: shard file} of a sharded checkpoint's index. The index is data: each name must be a
    relative path without ``..`` to an existing file that stays inside the model directory once
    symlinks are followed (or, for a snapshot of the HuggingFace hub cache, inside its ``blobs``)."""
    weight_map = read_json_object(index).get("weight_map")
    if not isinstance(weight_map, dict):
        raise ModelImportError(f"{index}: 'weight_map' must be an object of tensor name -> shard file")
    root = path.resolve()
    inside = [root]
    if root.parent.name == "snapshots":  # <cache>/models--org--name/snapshots/<revision>
        inside.append(root.parent.parent / "blobs")
    files: dict[str, Path] = {}
    for tensor, shard in weight_map.items():
        where = f"{index}: tensor '{tensor}' names shard {shard!r}"
        if not isinstance(shard, str) or not shard or "\x00" in shard:
            raise ModelImportError(f"{where}: not a file name")
        name = PurePosixPath(shard)
        if name.is_absolute() or ".." in name.parts:
            raise ModelImportError(f"{where}: shard names must be relative paths inside the model directory")
        file = path / name
        try:
            real = file.resolve()
        except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, a name the OS refuses
            raise ModelImportError(f"{where}, which cannot be resolved: {e}") from None
        if not any(real.is_relative_to(d) for d in inside):
            raise ModelImportError(f"{where}, which leads outside the model directory (to {real})")
        if not real.is_file():
            raise ModelImportError(f"{where}, which is missing")
        files[tensor] = file
    if not files:
        raise ModelImportError(f"{index}: 'weight_map' names no shard")
    return files


def _check_weight_map(index: Path, weight_map: Mapping[str, Path], store: SafetensorsStore) -> None:
    """Each tensor the index names is in the shard it names (a weight is never taken from a file
    the index does not say holds it)."""
    for tensor, file in weight_map.items():
        entry = store.entries.get(tensor)
        if entry is None or entry.file != file:
            found = f" (it is in '{entry.file.name}')" if entry is not None else ""
            raise ModelImportError(
                f"{index}: tensor '{tensor}' names shard '{file.name}', which does not hold it{found}"
            )


def decoder_program(cfg: DecoderConfig, store: Mapping[str, np.ndarray], source: str) -> Program:
    """The Program of a decoder config and a weight store (any frontend's last step): builds the IR,
    checks every weight the IR names against the store, and presents the weights in the IR's dtype.
    The config's sizes are checked against the weights before the IR is built (its embedding table,
    its last layer), so a config that claims more layers than the checkpoint holds costs nothing."""
    _check_sizes(cfg, store, source)
    module = build_decoder_module(cfg)
    resolved = _resolve_weights(module, store, source)
    weights: Mapping[str, np.ndarray] = _Renamed(store, resolved)
    weights = CastStore(weights, _STORAGE[cfg.dtype])
    info = ModelInfo(
        architecture=cfg.family, vocab_size=cfg.vocab_size, max_context=cfg.max_position,
        eos_token_ids=cfg.eos_token_ids, num_layers=cfg.num_layers, num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim, dtype=cfg.dtype,
    )
    return Program(module, weights, info)


def _check_sizes(cfg: DecoderConfig, store: Mapping[str, np.ndarray], source: str) -> None:
    """The embedding table is [vocab_size, hidden_size] and the last layer's first weight exists."""
    embed = find_key(cfg.names.embed, store)
    if embed is None:
        raise WeightError(f"{source}: missing weight '{cfg.names.embed}' (not in {_searched(store)})")
    have = _shape(store, embed)
    if have != (cfg.vocab_size, cfg.hidden_size):
        raise WeightError(f"{_file_of(store, embed, source)}: weight '{embed}' has shape {list(have)} but the "
                          f"config's vocab_size and hidden_size imply {[cfg.vocab_size, cfg.hidden_size]}")
    last = cfg.names.input_norm.format(i=cfg.num_layers - 1) + ".weight"
    if find_key(last, store) is None:
        raise WeightError(f"{source}: the config's {cfg.num_layers} layers need weight '{last}', which is "
                          f"not in {_searched(store)}")


def _file_of(store: Mapping[str, np.ndarray], key: str, source: str) -> str:
    files = _safetensors(store)
    return str(files.entries[key].file) if files is not None and key in files.entries else source


def _safetensors(store: Mapping[str, np.ndarray]) -> SafetensorsStore | None:
    """The safetensors files under ``store`` (itself, or a quantized checkpoint's), if any."""
    base = getattr(store, "base", store)
    return base if isinstance(base, SafetensorsStore) else None


def _resolve_weights(module: ModuleOp, store: Mapping[str, np.ndarray], source: str) -> dict[str, str]:
    """Maps each ix.weight name to a store key (checkpoints differ in a leading ``model.`` or
    ``transformer.``) and checks its shape; the first problem raises, naming the key."""
    out: dict[str, str] = {}
    for op in module.walk():
        if not isinstance(op, WeightOp):
            continue
        name = op.attributes["name"].data  # type: ignore[attr-defined]
        if name in out:
            continue
        key = find_key(name, store)
        if key is None:
            raise WeightError(f"{source}: missing weight '{name}' (not in {_searched(store)})")
        want = op.result.type
        assert isinstance(want, TensorType)
        have = _shape(store, key)
        if tuple(have) != tuple(want.shape):
            raise WeightError(f"{_file_of(store, key, source)}: weight '{key}' has shape {list(have)} but the "
                              f"config implies {list(want.shape)}")
        out[name] = key
    return out


def _searched(store: Mapping[str, np.ndarray]) -> str:
    files = _safetensors(store)
    if files is not None:
        return ", ".join(sorted({e.file.name for e in files.entries.values()})) or "any weight file"
    return "the state dict" if isinstance(store, _TorchStateStore) else "the file's tensors"


def find_key(name: str, store: Mapping[str, np.ndarray]) -> str | None:
    """The key of IR weight ``name`` in ``store``: itself, or without a leading ``model.`` or
    ``transformer.`` (checkpoints differ in those)."""
    if name in store:
        return name
    head, _, rest = name.partition(".")
    if head in ("model", "transformer") and rest in store:
        return rest
    return None


def _shape(store: Mapping[str, np.ndarray], key: str) -> tuple[int, ...]:
    shape = getattr(store, "shape", None)
    return tuple(shape(key)) if callable(shape) else tuple(store[key].shape)


class _Renamed(Mapping[str, np.ndarray]):
    def __init__(self, inner: Mapping[str, np.ndarray], names: dict[str, str]):
        self.inner, self.names = inner, names

    def __getitem__(self, key: str) -> np.ndarray:
        return self.inner[self.names[key]]

    def __contains__(self, key: object) -> bool:  # Mapping's default would read the tensor
        return key in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


class _TorchStateStore(Mapping[str, np.ndarray]):
    """A torch state dict seen as float32/float16 numpy arrays, converted on access."""

    def __init__(self, state: Mapping[str, Any]):
        self.state = state

    def __getitem__(self, key: str) -> np.ndarray:
        import torch

        t = self.state[key].detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self.state[key].shape)

    def __contains__(self, key: object) -> bool:  # Mapping's default would convert the tensor
        return key in self.state

    def __iter__(self) -> Iterator[str]:
        return iter(self.state)

    def __len__(self) -> int:
        return len(self.state)
