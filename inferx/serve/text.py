"""Text for serving and ``inferx run``: an artifact's tokenizer, chat prompts, and stop strings
over text decoded as tokens arrive."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


class TextError(ValueError):
    """A tokenizer that does not load, or a chat the template cannot render; the message says which."""


def artifact_tokenizer(art: Any) -> Any | None:
    """The tokenizer an artifact carries (``transformers``' AutoTokenizer over its files,
    unpacked into a temporary directory), or None where it carries none."""
    from inferx.runtime.manifest import Manifest

    names = list(Manifest.from_sections(art.manifest, art.path).tokenizer.files)
    if not names:
        return None
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory(prefix="inferx-tokenizer-") as tmp:
        for name in names:
            dest = Path(tmp, name.removeprefix("tokenizer/"))
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(art.file_bytes(name))
        try:
            return AutoTokenizer.from_pretrained(tmp)
        except (OSError, ValueError) as e:
            raise TextError(f"{art.path}: its tokenizer does not load: {' '.join(str(e).split())}") from None


def chat_ids(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> list[int]:
    """The token ids of ``messages`` ({"role", "content"} each) with the assistant's turn opened,
    by the tokenizer's chat template (a Jinja template, which ``transformers`` renders in a
    sandbox)."""
    if not getattr(tokenizer, "chat_template", None):
        raise TextError("its tokenizer has no chat template")
    try:
        rendered = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    except Exception as e:  # a template's own error (raise_exception in it, an undefined name)
        raise TextError(f"its chat template fails on these messages: {' '.join(str(e).split())}") from None
    return list(tokenizer(rendered, add_special_tokens=False)["input_ids"])


class TextStream:
    """A request's text as its tokens arrive: ``add`` returns the text that may be shown now, and
    whether a stop string ended it. Text is held back while it may still become a stop string,
    or ends in an unfinished character (a token that is part of a UTF-8 sequence); a stop string
    and what follows it are never shown.

    Each token is decoded with the few before it, not the whole text again (a long reply would
    cost its length squared): the text of tokens ``[prefix:]`` less that of ``[prefix:read]``
    is what they add, once it ends in a whole character; the tokens before ``read`` are then
    settled, and the next decode starts at the old ``read``, so a tokenizer that spells a word's
    leading space by context still sees the token before."""

    def __init__(self, tokenizer: Any, stops: Sequence[str] = ()):
        self.tokenizer = tokenizer
        self.stops = [s for s in stops if s]
        self.tokens: list[int] = []
        self.prefix = self.read = 0  # token offsets: the decode's context starts at prefix, new tokens at read
        self.shown = 0  # characters of the text shown so far
        self.text = ""

    def add(self, token: int | None, last: bool) -> tuple[str, bool]:
        """(text to show now, whether a stop string ended it); ``last``: no token follows."""
        if token is not None:
            self.tokens.append(token)
        before = len(self.text)
        self._settle(last)
        start = max(0, before - max((len(s) for s in self.stops), default=1) + 1)
        cut = min((i for i in (self.text.find(s, start) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.text = self.text[:cut]
            return self._show(len(self.text)), True
        if last:
            return self._show(len(self.text)), False
        safe = len(self.text)
        # the longest tail that starts a stop string stays back
        safe -= max((k for s in self.stops for k in range(min(len(s) - 1, safe), 0, -1)
                     if self.text[safe - k:safe] == s[:k]), default=0)
        return self._show(max(safe, self.shown)), False

    def _settle(self, last: bool) -> None:
        """Appends the text of the tokens past ``read`` once it ends in a whole character (or
        with ``last``, as it is)."""
        decode = self.tokenizer.decode
        context = decode(self.tokens[self.prefix:self.read], skip_special_tokens=True)
        now = decode(self.tokens[self.prefix:], skip_special_tokens=True)
        if last or (len(now) > len(context) and not now.endswith("\ufffd")):
            self.text += now[len(context):]
            self.prefix, self.read = self.read, len(self.tokens)

    def _show(self, upto: int) -> str:
        out, self.shown = self.text[self.shown:upto], max(self.shown, upto)
        return out
