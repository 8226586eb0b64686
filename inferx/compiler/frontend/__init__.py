"""Frontends: everything that becomes a ``Program``.

``import_model`` dispatches on what it is given: an HF model directory, a GGUF file, a
``transformers`` model object, or any ``torch.nn.Module`` with ``example_inputs``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inferx.program import Program


def import_model(src: Any, **options: Any) -> Program:
    """Imports ``src`` into a Program. Options: ``dtype`` ("f32", "f16", "bf16"); for an
    ``nn.Module``, ``example_inputs`` (a tuple) and ``dynamic_shapes`` as torch.export takes them."""
    if isinstance(src, (str, Path)):
        path = Path(src)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such file or directory")
        if path.is_dir():
            from inferx.compiler.frontend.hf import import_hf_dir

            return import_hf_dir(path, **options)
        if path.suffix == ".gguf":
            from inferx.compiler.frontend.gguf import import_gguf

            return import_gguf(path, **options)
        raise ValueError(f"{path}: expected an HF model directory or a .gguf file")
    if hasattr(src, "config") and hasattr(src, "state_dict") and hasattr(src.config, "to_dict"):
        from inferx.compiler.frontend.hf import import_hf_model

        return import_hf_model(src, **options)
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(src, torch.nn.Module):
        if "example_inputs" not in options:
            raise ValueError("importing an nn.Module needs example_inputs=(...) for torch.export")
        from inferx.compiler.frontend.torch_export import import_torch_module

        example = options.pop("example_inputs")
        return import_torch_module(src, tuple(example), **options)
    raise TypeError(f"cannot import a {type(src).__name__}: expected a path, a transformers model or an nn.Module")
