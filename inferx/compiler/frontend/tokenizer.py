"""A checkpoint's tokenizer, attached to the imported Program and built on first use: building
one imports ``transformers`` (seconds), which importing a model should not pay.

``LazyTokenizer`` answers calls and attributes as the built tokenizer does; ``load()`` returns
it. The tokenizer is data: read from the checkpoint's files alone (no hub, no code the checkpoint
ships: ``trust_remote_code`` off). One that cannot be built raises ``TokenizerError`` naming the
checkpoint and the first line of the reason.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

# Files one of which an HF checkpoint directory holds when it carries a tokenizer (a fast
# tokenizer's tokenizer.json, a SentencePiece model, a BPE vocabulary)
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")


class TokenizerError(ValueError):
    """A checkpoint's tokenizer that does not build; the message names the checkpoint."""


def has_transformers() -> bool:
    return importlib.util.find_spec("transformers") is not None


class LazyTokenizer:
    """The tokenizer of ``path`` (an HF checkpoint directory, or a GGUF file's vocabulary where
    ``gguf``), built by ``transformers.AutoTokenizer`` on first use."""

    def __init__(self, path: Path, gguf: bool = False):
        self.path = Path(path)
        self.gguf = gguf
        self._tokenizer: Any = None

    def load(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            try:
                if self.gguf:
                    self._tokenizer = AutoTokenizer.from_pretrained(str(self.path.parent), gguf_file=self.path.name)
                else:
                    self._tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True,
                                                                    trust_remote_code=False)
            except (OSError, ValueError, TypeError, KeyError) as e:
                reason = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
                raise TokenizerError(f"{self.path}: its tokenizer cannot be read ({reason})") from None
        return self._tokenizer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __repr__(self) -> str:
        state = "loaded" if self._tokenizer is not None else "not loaded yet"
        return f"LazyTokenizer({str(self.path)!r}, {state})"


def hf_dir_tokenizer(path: Path) -> LazyTokenizer | None:
    """The tokenizer of the HF checkpoint directory ``path`` (built on first use), or None where
    it holds no tokenizer file or ``transformers`` is not installed."""
    if not any((path / f).is_file() for f in HF_TOKENIZER_FILES) or not has_transformers():
        return None
    return LazyTokenizer(path)
