"""InferX: an LLM compiler for NVIDIA Hopper GPUs.

Public API (design.md): ``import_model``; ``Program.reference_session()``; sessions with
``prefill``, ``decode``, ``generate`` and ``reset``.
"""

from __future__ import annotations

from typing import Any


def import_model(src: Any, **options: Any):  # -> Program
    """See ``inferx.compiler.frontend.import_model``."""
    from inferx.compiler.frontend import import_model as _import

    return _import(src, **options)
