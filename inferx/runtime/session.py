"""The Session contract every backend answers (reference, CPU, CUDA, C), and the host-side
logic they share: input checks, padding, positions, context lengths and greedy generation.

A backend implements ``_step(entry, input_ids, positions, kv_lens, rows) -> logits`` and owns the
KV cache. ``positions[b, i]`` is the absolute position of token i of sequence b (-1 for padding);
``kv_lens[b]`` the valid cache length after the step (see ``inferx.models.decoder``); ``rows``,
when given, the flat indices ``b * seq + i`` of the only logits rows to return ([len(rows), 1,
vocab]), so that a backend whose logits live on a device copies those rows alone. A backend whose
program has the ``prefill_last`` entry (``entry_points``) computes those rows alone instead: the
final norm and LM head over one row per sequence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from inferx.runtime.manifest import Manifest
from inferx.runtime.model_info import ModelInfo


class SessionError(ValueError):
    """Input a session refuses (bad token id, too long, batch too large); names value and limit."""


def as_int_array(x: Any, what: str) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise SessionError(f"{what} must be integer token ids, got dtype {a.dtype}")
    return a.astype(np.int64)


def _host(logits: Any) -> np.ndarray:
    """Logits as a host array (sessions may return torch tensors on a device)."""
    return logits.float().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits)


def manifest_limits(manifest: Manifest, max_batch: int | None) -> tuple[ModelInfo, int, int]:
    """What a session over an artifact needs from its manifest: the model, the batch it serves
    (``max_batch`` or the compiled maximum; SessionError above that) and the maximum context."""
    limits = manifest.limits
    batch = limits.max_batch if max_batch is None else max_batch
    if batch > limits.max_batch:
        raise SessionError(f"max_batch {batch} exceeds the artifact's compiled maximum {limits.max_batch}")
    return manifest.model, batch, limits.max_seq_len


class DecoderSession(ABC):
    """prefill / decode / generate / reset over a backend's ``_step``."""

    def __init__(self, info: ModelInfo, *, max_batch: int, max_context: int):
        if max_context > info.max_context:
            raise SessionError(f"max_context {max_context} exceeds the model's {info.max_context}")
        self.info = info
        self.max_batch = max_batch
        self.max_context = max_context
        self.lengths: np.ndarray | None = None  # tokens held per sequence
        self.entry_points: frozenset[str] = frozenset({"prefill", "decode"})  # the backend's program has these

    # the backend ---------------------------------------------------------------------------
    @abstractmethod
    def _step(self, entry: str, input_ids: np.ndarray, positions: np.ndarray,
              kv_lens: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray: ...

    @abstractmethod
    def _reset_cache(self, batch: int) -> None: ...

    # the contract --------------------------------------------------------------------------
    def reset(self) -> None:
        """Forgets every sequence."""
        self.lengths = None

    def prefill(self, input_ids: Any, lengths: Sequence[int] | None = None, *, logits: str = "all") -> np.ndarray:
        """Appends prompts to the sequences; returns logits [batch, seq, vocab], or with
        ``logits="last"`` those of each prompt's last token alone, [batch, 1, vocab] (what
        generation needs: the ``prefill_last`` entry computes those rows alone, and a CUDA
        session copies batch rows to the host, not batch x seq).

        ``input_ids`` is [batch, seq], or a list of token lists of different lengths (padded on
        the right; logits at padded places are not meaningful). ``lengths`` gives the real
        length of each row of a padded [batch, seq] array.
        """
        if logits not in ("all", "last"):
            raise SessionError(f"logits must be 'all' or 'last', got {logits!r}")
        ids, n = self._rows(input_ids, lengths)
        batch, seq = ids.shape
        self._start(batch)
        assert self.lengths is not None
        if int((self.lengths + n).max()) > self.max_context:
            worst = int(np.argmax(self.lengths + n))
            raise SessionError(
                f"sequence {worst} would hold {int(self.lengths[worst] + n[worst])} tokens; "
                f"the maximum context is {self.max_context}"
            )
        col = np.arange(seq)[None, :]
        positions = np.where(col < n[:, None], self.lengths[:, None] + col, -1)
        kv_lens = self.lengths + n
        if logits == "last" and "prefill_last" in self.entry_points:
            out = self._step("prefill_last", ids, positions, kv_lens)
        else:  # an artifact compiled before prefill_last existed takes the rows from every row's logits
            rows = np.arange(batch) * seq + n - 1 if logits == "last" else None
            out = self._step("prefill", ids, positions, kv_lens, rows)
        self.lengths = kv_lens
        return out

    def decode(self, input_ids: Any) -> np.ndarray:
        """One token per sequence ([batch] or [batch, 1]); returns logits [batch, 1, vocab]."""
        ids = as_int_array(input_ids, "input_ids").reshape(-1, 1)
        if self.lengths is None:
            raise SessionError("decode before prefill: there is no sequence to extend")
        if ids.shape[0] != len(self.lengths):
            raise SessionError(f"decode got {ids.shape[0]} sequences; the session holds {len(self.lengths)}")
        self._check_ids(ids)
        if int(self.lengths.max()) + 1 > self.max_context:
            raise SessionError(f"a sequence is full: the maximum context is {self.max_context}")
        kv_lens = self.lengths + 1
        logits = self._step("decode", ids, self.lengths[:, None].copy(), kv_lens)
        self.lengths = kv_lens
        return logits

    def generate(self, input_ids: Any, max_new_tokens: int, *, stop_at_eos: bool = True) -> np.ndarray:
        """Greedy generation from fresh prompts: token ids [batch, <= max_new_tokens].

        A sequence that emits an EOS id keeps emitting it until every sequence has (or the
        budget ends)."""
        ids, n = self._rows(input_ids, None)
        self.reset()
        nxt = _host(self.prefill(ids, n.tolist(), logits="last"))[:, 0].argmax(-1)
        out = [nxt]
        eos = set(self.info.eos_token_ids) if stop_at_eos else set()
        done = np.isin(nxt, list(eos))
        for _ in range(max_new_tokens - 1):
            if eos and done.all():
                break
            step = _host(self.decode(nxt[:, None]))[:, 0].argmax(-1)
            nxt = np.where(done, nxt, step)
            done |= np.isin(nxt, list(eos))
            out.append(nxt)
        return np.stack(out, axis=1)

    # helpers -------------------------------------------------------------------------------
    def _rows(self, input_ids: Any, lengths: Sequence[int] | None) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(input_ids, (list, tuple)) and input_ids and not np.isscalar(input_ids[0]):
            rows = [as_int_array(r, "input_ids").reshape(-1) for r in input_ids]
            n = np.array([len(r) for r in rows], dtype=np.int64)
            ids = np.zeros((len(rows), int(n.max())), dtype=np.int64)
            for i, r in enumerate(rows):
                ids[i, : len(r)] = r
        else:
            ids = as_int_array(input_ids, "input_ids")
            if ids.ndim == 1:
                ids = ids[None, :]
            if ids.ndim != 2:
                raise SessionError(f"input_ids must be [batch, seq], got shape {list(ids.shape)}")
            n = np.full(ids.shape[0], ids.shape[1], dtype=np.int64) if lengths is None else np.asarray(lengths)
        if ids.shape[1] == 0 or (n <= 0).any():
            raise SessionError("every prompt needs at least one token")
        if (n > ids.shape[1]).any():
            raise SessionError(f"lengths {n.tolist()} exceed the {ids.shape[1]} columns of input_ids")
        if ids.shape[0] > self.max_batch:
            raise SessionError(f"batch of {ids.shape[0]} exceeds the maximum batch {self.max_batch}")
        self._check_ids(np.where(np.arange(ids.shape[1])[None] < n[:, None], ids, 0))
        return ids, n.astype(np.int64)

    def _check_ids(self, ids: np.ndarray) -> None:
        bad = (ids < 0) | (ids >= self.info.vocab_size)
        if bad.any():
            b, i = map(int, np.argwhere(bad)[0])
            raise SessionError(
                f"token id {int(ids[b, i])} at [{b}, {i}] is outside the vocabulary [0, {self.info.vocab_size})"
            )

    def _start(self, batch: int) -> None:
        if self.lengths is None:
            self._reset_cache(batch)
            self.lengths = np.zeros(batch, dtype=np.int64)
        elif len(self.lengths) != batch:
            raise SessionError(
                f"prefill of {batch} sequences; the session holds {len(self.lengths)} (call reset() first)"
            )
