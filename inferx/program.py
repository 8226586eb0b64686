"""``Program``: what a frontend produces and every later stage consumes.

A Program is an `ix` module, the weight store its ``ix.weight`` ops name, and, for decoder LLMs,
the model's metadata. Decoder programs have the entry points ``prefill`` and ``decode`` with an
explicit KV cache (see ``inferx.models.decoder``); generic programs (torch.export) have ``forward``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from inferx.runtime.model_info import ModelInfo

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp


@dataclass
class Program:
    """An `ix` module plus its weights. ``info`` is None for generic (non-decoder) programs."""

    module: ModuleOp
    weights: Mapping[str, np.ndarray]
    info: ModelInfo | None = None
    tokenizer: object | None = None
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        return str(self.module)

    def reference_session(self, **options: object):  # -> Session
        """A Session backed by the reference interpreter (the oracle)."""
        from inferx.compiler.interpreter.session import reference_session

        return reference_session(self, **options)
