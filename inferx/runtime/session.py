"""The Session contract every backend answers (reference, CPU, CUDA, C), and the host-side
logic they share: input checks, padding, positions, context lengths and generation (greedy, or
drawn as ``inferx.runtime.sampling`` says).

``InputCheck`` is the one check of a session's inputs (token ids, lengths, batch, context) and
``check_model`` of the model facts a session relies on; both run before any state changes, any
allocation or any step, and refuse with a SessionError naming the argument and the value.

A backend implements ``_step(entry, input_ids, positions, kv_lens, rows) -> logits`` and owns the
KV cache. ``positions[b, i]`` is the absolute position of token i of sequence b (-1 for padding);
``kv_lens[b]`` the valid cache length after the step (see ``inferx.models.decoder``); ``rows``,
when given, the flat indices ``b * seq + i`` of the only logits rows to return ([len(rows), 1,
vocab]), so that a backend whose logits live on a device copies those rows alone. A backend whose
program has the ``prefill_last`` entry (``entry_points``) computes those rows alone instead: the
final norm and LM head over one row per sequence. A backend whose cache is paged
(``ModelInfo.kv_paging``) passes ``block_table(n)`` after the lengths: the session gives each row
the blocks its written positions need before the step (``inferx.runtime.kv_blocks``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferx.runtime.draw import draw
from inferx.runtime.kv_blocks import BlockPool, PoolFull
from inferx.runtime.manifest import Manifest
from inferx.runtime.model_info import ModelInfo
from inferx.runtime.sampling import SamplingError, SamplingParams, per_row


class SessionError(ValueError):
    """Input a session refuses (bad token id, too long, batch too large); names the argument, the
    value at fault and the limit."""


def as_int_array(x: Any, what: str) -> np.ndarray:
    """``x`` (a list, a numpy array or a torch tensor on any device) as a numpy array of integers,
    in its own integer dtype; SessionError naming ``what`` for floats, bools, strings, objects and
    ragged nesting. An empty input comes back empty (int64), for the caller to name the empty dim."""
    if hasattr(x, "detach"):  # torch tensor
        name = str(x.dtype).removeprefix("torch.")
        if not name.startswith(("int", "uint")):
            raise SessionError(f"{what} must hold integer token ids, got a tensor of dtype {name}")
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x)
    except (ValueError, TypeError) as e:  # ragged nesting, objects numpy cannot hold
        raise SessionError(f"{what} is not an array of integer token ids: {e}") from None
    if a.size == 0:
        return np.zeros(a.shape, np.int64)
    if a.dtype.kind not in "iu":
        raise SessionError(f"{what} must hold integer token ids, got dtype {a.dtype} (first value {_show(a.flat[0])})")
    return a


def _show(v: Any) -> str:
    text = repr(v.item() if isinstance(v, np.generic) else v)
    return text if len(text) <= 40 else text[:37] + "..."


def _count(v: Any, what: str, minimum: int) -> int:
    """An option that counts something (a batch, tokens): an int (numpy's too, not a bool) >= minimum."""
    if not _is_int(v):
        raise SessionError(f"{what} must be an integer, got {_show(v)}")
    if v < minimum:
        raise SessionError(f"{what} must be at least {minimum}, got {int(v)}")
    return int(v)


def manifest_limits(manifest: Manifest, max_batch: int | None) -> tuple[ModelInfo, int, int]:
    """What a session over an artifact needs from its manifest: the model, the batch it serves
    (``max_batch`` or the compiled maximum; SessionError above that) and the maximum context."""
    limits = manifest.limits
    batch = limits.max_batch if max_batch is None else _count(max_batch, "max_batch", 1)
    if batch > limits.max_batch:
        raise SessionError(f"max_batch {batch} exceeds the artifact's compiled maximum {limits.max_batch}")
    return manifest.model, batch, limits.max_seq_len


def check_model(info: ModelInfo) -> None:
    """The model facts a session relies on: a vocabulary, and EOS ids that are integers >= 0 (an
    EOS id held as a string would never match a generated token). An EOS id past the vocabulary
    is kept: the model never emits it, so generation runs its budget (tiny test models keep their
    family's default EOS id with a small vocabulary)."""
    _count(info.vocab_size, "the model's vocab_size", 1)
    for i, t in enumerate(info.eos_token_ids):
        if not _is_int(t) or t < 0:
            raise SessionError(f"the model's eos_token_ids[{i}] = {_show(t)} is not a token id (an integer >= 0)")


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True)
class InputCheck:
    """The one check of what every session (reference, CPU, CUDA) is given, run before any state
    changes or any work: token ids are integers in [0, vocab) of the documented shapes, batches fit
    ``max_batch`` and sequences ``max_context``. Each failure is a SessionError naming the argument
    and the value."""

    vocab_size: int
    max_batch: int
    max_context: int

    def prompts(self, input_ids: Any, lengths: Any) -> tuple[np.ndarray, np.ndarray]:
        """prefill's prompts as int64 [batch, seq] with padding set to 0, and each row's length.

        ``input_ids`` is [seq] (one prompt), [batch, seq], or a list of rows of different lengths
        (padded on the right here, each row's length its own: ``lengths`` is then refused);
        ``lengths`` gives the real length of each row of a padded [batch, seq] array."""
        ragged = None
        if isinstance(input_ids, (list, tuple)) and input_ids and not np.isscalar(input_ids[0]):
            rows = [as_int_array(r, f"input_ids[{i}]") for i, r in enumerate(input_ids)]
            for i, r in enumerate(rows):
                if r.ndim != 1:
                    raise SessionError(f"input_ids[{i}] must be a list of token ids, got shape {list(r.shape)}")
                self._vocab(r, f"input_ids[{i}]")
            sizes = [len(r) for r in rows]
            if len(set(sizes)) > 1:
                if lengths is not None:
                    raise SessionError(
                        "lengths is for a padded [batch, seq] array; input_ids is a list of rows "
                        f"of lengths {sizes}, which are their own lengths"
                    )
                if 0 in sizes:
                    raise SessionError(f"input_ids[{sizes.index(0)}] is empty: every prompt needs one token at least")
                self._batch(len(rows))
                self._columns(max(sizes))
                ragged = np.array(sizes, dtype=np.int64)
                a = np.zeros((len(rows), max(sizes)), dtype=np.int64)
                for i, r in enumerate(rows):
                    a[i, : len(r)] = r
            else:
                a = np.stack([r.astype(np.int64) for r in rows])
        else:
            a = as_int_array(input_ids, "input_ids")
            if a.ndim == 1:
                a = a[None, :]
        if a.ndim != 2:
            raise SessionError(f"input_ids must be [batch, seq] or [seq], got shape {list(a.shape)}")
        batch, seq = a.shape
        if batch == 0:
            raise SessionError(f"input_ids holds no prompt (shape {list(a.shape)})")
        self._batch(batch)
        if seq == 0:
            raise SessionError(f"input_ids has no tokens (shape {list(a.shape)}): every prompt needs one at least")
        self._columns(seq)
        if ragged is not None:
            return a, ragged
        n = np.full(batch, seq, dtype=np.int64) if lengths is None else self._lengths(lengths, batch, seq)
        real = np.arange(seq)[None, :] < n[:, None]
        # padding is no token: nothing reads its logits, and the embedding gather stays in range
        a = np.where(real, a, 0)
        self._vocab(a, "input_ids")
        return a.astype(np.int64), n

    def tokens(self, input_ids: Any, held: int) -> np.ndarray:
        """decode's one token per held sequence, given as [batch] or [batch, 1]: int64 [batch, 1]."""
        a = as_int_array(input_ids, "input_ids")
        if not (a.ndim == 1 or (a.ndim == 2 and a.shape[1] == 1)):
            raise SessionError(
                f"decode takes one token per sequence, input_ids of shape [batch] or [batch, 1]; "
                f"got shape {list(a.shape)}"
            )
        if a.shape[0] != held:
            raise SessionError(f"decode got {a.shape[0]} sequences; the session holds {held}")
        a = a.reshape(-1, 1)
        self._vocab(a, "input_ids")
        return a.astype(np.int64)

    def eos(self, eos_token_ids: Any) -> np.ndarray:
        """generate's ``eos_token_ids``: a token id or a list of them, each in [0, vocab)."""
        given = eos_token_ids.tolist() if hasattr(eos_token_ids, "detach") else eos_token_ids  # torch tensor
        ids = [given] if _is_int(given) else given
        if not isinstance(ids, (list, tuple, np.ndarray)):
            raise SessionError(f"eos_token_ids must be a token id or a list of them, got {_show(eos_token_ids)}")
        for i, t in enumerate(ids):
            if not _is_int(t) or not 0 <= t < self.vocab_size:
                raise SessionError(f"eos_token_ids[{i}] = {_show(t)} is not a token id in [0, {self.vocab_size})")
        return np.array(ids, dtype=np.int64)

    def room(self, held: np.ndarray, more: np.ndarray, what: str) -> None:
        """Each sequence's ``held`` tokens plus ``more`` fit the context."""
        total = held + more
        if int(total.max()) > self.max_context:
            b = int(np.argmax(total))
            raise SessionError(
                f"{what}: sequence {b} would hold {int(total[b])} tokens; the maximum context is {self.max_context}"
            )

    def _batch(self, batch: int) -> None:
        if batch > self.max_batch:
            raise SessionError(f"batch of {batch} exceeds the maximum batch {self.max_batch}")

    def _columns(self, seq: int) -> None:
        if seq > self.max_context:
            raise SessionError(f"input_ids has {seq} tokens per row; the maximum context is {self.max_context}")

    def _lengths(self, lengths: Any, batch: int, seq: int) -> np.ndarray:
        n = as_int_array(lengths, "lengths")
        if n.shape != (batch,):
            raise SessionError(
                f"lengths must give one length for each of the {batch} rows of input_ids, got shape {list(n.shape)}"
            )
        bad = (n < 1) | (n > seq)
        if bad.any():
            b = int(np.argmax(bad))
            raise SessionError(f"lengths[{b}] = {int(n[b])} is outside [1, {seq}] (input_ids has {seq} columns)")
        return n.astype(np.int64)

    def _vocab(self, ids: np.ndarray, what: str) -> None:
        bad = (ids < 0) | (ids >= self.vocab_size)
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise SessionError(
                f"{what}: token id {int(ids[at])} at {list(at)} is outside the vocabulary [0, {self.vocab_size})"
            )


@dataclass(frozen=True)
class SavedBlocks:
    """A paged row saved by ``save_row``: its ``blocks`` and every layer's K and V of them."""

    blocks: int
    caches: list[Any]


class DecoderSession(ABC):
    """prefill / decode / generate / reset over a backend's ``_step``. Every input passes
    ``self.inputs`` (InputCheck) before the session's state changes or a step runs."""

    def __init__(self, info: ModelInfo, *, max_batch: int, max_context: int):
        check_model(info)
        max_batch = _count(max_batch, "max_batch", 1)
        max_context = _count(max_context, "max_context", 1)
        if max_context > info.max_context:
            raise SessionError(f"max_context {max_context} exceeds the model's {info.max_context}")
        paging = info.kv_paging
        if paging is not None and max_context > paging.blocks_per_seq * paging.block_size:
            raise SessionError(f"max_context {max_context} exceeds the paged cache's {paging.blocks_per_seq} blocks "
                               f"of {paging.block_size} positions a sequence")
        self.info = info
        self.max_batch = max_batch
        self.max_context = max_context
        self.inputs = InputCheck(info.vocab_size, max_batch, max_context)
        self.lengths: np.ndarray | None = None  # tokens held per sequence
        self.held_rows: int | None = None  # rows a caller fills itself (hold_rows), else None
        self.entry_points: frozenset[str] = frozenset({"prefill", "decode"})  # the backend's program has these
        self.pages: BlockPool | None = None  # a paged cache's blocks (inferx.runtime.kv_blocks)

    # the backend ---------------------------------------------------------------------------
    @abstractmethod
    def _step(
        self,
        entry: str,
        input_ids: np.ndarray,
        positions: np.ndarray,
        kv_lens: np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray: ...

    @abstractmethod
    def _reset_cache(self, batch: int) -> None:
        """A zeroed cache for ``batch`` rows: [batch, kv heads, context, head_dim] a layer's K and
        V, or a paged cache's pool (``ModelInfo.cache_shape``)."""

    def _block_caches(self, blocks: list[int]) -> list[Any]:
        """Host copies of ``blocks`` of every layer's K and V pool, in the cache's order."""
        raise SessionError(f"{type(self).__name__} cannot save blocks of its cache")

    def _set_block_caches(self, blocks: list[int], saved: list[Any]) -> None:
        raise SessionError(f"{type(self).__name__} cannot restore blocks of its cache")

    def _new_cache(self, batch: int) -> None:
        paging = self.info.kv_paging
        self.pages = None if paging is None else BlockPool(paging, batch)
        self._reset_cache(batch)

    def _run(self, entry: str, input_ids: np.ndarray, positions: np.ndarray, kv_lens: np.ndarray,
             rows: np.ndarray | None = None) -> np.ndarray:
        """``_step``, each row of a paged cache given the blocks its written positions need first
        (SessionError, nothing run, if the pool has too few free)."""
        if self.pages is not None:
            written = np.where(positions >= 0, positions + 1, 0).max(axis=1)
            for r in np.flatnonzero(written):
                try:
                    self.pages.cover(int(r), int(written[r]))
                except PoolFull as e:
                    raise SessionError(f"the paged KV cache is full: {e}") from None
        return self._step(entry, input_ids, positions, kv_lens, rows)

    def block_table(self, n: int) -> np.ndarray:
        """The first ``n`` rows of a paged cache's block table, int32 [n, blocks a sequence]
        (-1: no block), for a backend's ``_step``."""
        assert self.pages is not None, "block_table of a contiguous cache"
        return self.pages.table[:n]

    def _row_caches(self, row: int) -> list[Any]:
        """Host copies of ``row`` of every layer's K and V cache, in the cache's order."""
        raise SessionError(f"{type(self).__name__} cannot save a row of its cache")

    def _set_row_caches(self, row: int, saved: list[Any]) -> None:
        raise SessionError(f"{type(self).__name__} cannot restore a row of its cache")

    # the contract --------------------------------------------------------------------------
    def reset(self) -> None:
        """Forgets every sequence."""
        self.lengths = None
        self.held_rows = None

    def prefill(self, input_ids: Any, lengths: Sequence[int] | None = None, *, logits: str = "all") -> np.ndarray:
        """Appends prompts to the sequences; returns logits [batch, seq, vocab], or with
        ``logits="last"`` those of each prompt's last token alone, [batch, 1, vocab] (what
        generation needs: the ``prefill_last`` entry computes those rows alone, and a CUDA
        session copies batch rows to the host, not batch x seq).

        ``input_ids`` is [batch, seq] (or [seq], one prompt), or a list of token lists of
        different lengths (padded on the right; logits at padded places are not meaningful).
        ``lengths`` gives the real length of each row of a padded [batch, seq] array.
        """
        if logits not in ("all", "last"):
            raise SessionError(f"logits must be 'all' or 'last', got {logits!r}")
        ids, n = self.inputs.prompts(input_ids, lengths)
        batch, seq = ids.shape
        if self.lengths is not None and len(self.lengths) != batch:
            raise SessionError(
                f"prefill of {batch} sequences; the session holds {len(self.lengths)} (call reset() first)"
            )
        held = np.zeros(batch, dtype=np.int64) if self.lengths is None else self.lengths
        self.inputs.room(held, n, "prefill")
        if self.lengths is None:
            self._new_cache(batch)
        col = np.arange(seq)[None, :]
        positions = np.where(col < n[:, None], held[:, None] + col, -1)
        kv_lens = held + n
        if logits == "last" and "prefill_last" in self.entry_points:
            out = self._run("prefill_last", ids, positions, kv_lens)
        else:  # an artifact compiled before prefill_last existed takes the rows from every row's logits
            rows = np.arange(batch) * seq + n - 1 if logits == "last" else None
            out = self._run("prefill", ids, positions, kv_lens, rows)
        self.lengths = kv_lens
        return out

    def decode(self, input_ids: Any) -> np.ndarray:
        """One token per sequence, [batch] or [batch, 1] (never [1, n]: that is n tokens of one
        sequence); returns logits [batch, 1, vocab]."""
        if self.lengths is None:
            raise SessionError("decode before prefill: there is no sequence to extend")
        ids = self.inputs.tokens(input_ids, len(self.lengths))
        self.inputs.room(self.lengths, np.ones_like(self.lengths), "decode")
        kv_lens = self.lengths + 1
        logits = self._run("decode", ids, self.lengths[:, None].copy(), kv_lens)
        self.lengths = kv_lens
        return logits

    # rows held by a caller (the serving engine) ------------------------------------------------
    def hold_rows(self, rows: int) -> None:
        """Forgets every sequence and holds a cache of ``rows`` rows that the caller fills with
        ``step_rows``, deciding itself which row holds which sequence (``inferx.runtime.engine``)."""
        rows = _count(rows, "rows", 1)
        self.inputs._batch(rows)
        self.reset()
        self._new_cache(rows)
        self.held_rows = rows

    def step_rows(self, entry: str, input_ids: np.ndarray, positions: np.ndarray, kv_lens: np.ndarray) -> np.ndarray:
        """One step of ``entry`` ("prefill_last" or "decode") over the first n held rows (the
        rest untouched): ``input_ids`` and ``positions`` [n, seq] (a negative position is no
        token: nothing is written for it and its logits mean nothing), ``kv_lens`` [n] the tokens
        each row holds after the step. Returns the logits [n, 1, vocab] of each row's last token.
        The caller checked the ids and that every row fits the context (``Engine.submit``)."""
        rows = self.held_rows
        if rows is None or self.lengths is not None:
            raise SessionError("step_rows before hold_rows (or after prefill, decode or generate took the cache)")
        n = input_ids.shape[0]
        if not 1 <= n <= rows or positions.shape != input_ids.shape or kv_lens.shape != (n,):
            raise SessionError(f"step_rows takes [n, seq] ids and positions and [n] kv_lens, n at most {rows}; "
                               f"got {list(input_ids.shape)}, {list(positions.shape)}, {list(kv_lens.shape)}")
        if entry == "prefill_last" and "prefill_last" not in self.entry_points:
            real = (positions >= 0).sum(axis=1)
            last = np.arange(n) * input_ids.shape[1] + np.maximum(real - 1, 0)
            return self._run("prefill", input_ids, positions, kv_lens, last)
        if entry not in ("prefill_last", "decode"):
            raise SessionError(f"step_rows runs prefill_last or decode, not {entry!r}")
        return self._run(entry, input_ids, positions, kv_lens)

    def save_row(self, row: int) -> Any:
        """A host copy of held row ``row`` of the KV cache (every layer's K and V: the whole
        context, or the blocks a paged row holds), for ``restore_row`` to put back in any row: how
        the engine preempts a request and resumes it later."""
        self._held_row(row)
        if self.pages is not None:
            blocks = self.pages.row_blocks(row)
            return SavedBlocks(len(blocks), self._block_caches(blocks))
        return self._row_caches(row)

    def restore_row(self, row: int, saved: Any) -> None:
        """Puts a ``save_row`` copy back as held row ``row`` (a paged row: into fresh blocks;
        SessionError if the pool has too few free)."""
        self._held_row(row)
        if self.pages is not None:
            if not isinstance(saved, SavedBlocks) or len(saved.caches) != 2 * self.info.num_layers:
                raise SessionError("restore_row takes what save_row returned: a paged row's blocks")
            self.pages.release(row)
            try:
                blocks = self.pages.place(row, saved.blocks)
            except PoolFull as e:
                raise SessionError(f"restore_row: the paged KV cache is full: {e}") from None
            self._set_block_caches(blocks, saved.caches)
            return
        if not isinstance(saved, list) or len(saved) != 2 * self.info.num_layers:
            raise SessionError(f"restore_row takes what save_row returned: {2 * self.info.num_layers} arrays")
        self._set_row_caches(row, saved)

    def release_row(self, row: int) -> None:
        """Held row ``row`` holds no sequence any more: a paged row's blocks go back to the pool
        (a contiguous row is simply written over by the next)."""
        self._held_row(row)
        if self.pages is not None:
            self.pages.release(row)

    def _held_row(self, row: int) -> None:
        if self.held_rows is None or self.lengths is not None:
            raise SessionError("save_row and restore_row work on rows held by hold_rows")
        if isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < self.held_rows:
            raise SessionError(f"row {row!r} is not one of the {self.held_rows} held rows")

    def generate(
        self, input_ids: Any, max_new_tokens: int, *, stop_at_eos: bool = True, eos_token_ids: Any = None,
        sampling: SamplingParams | Sequence[SamplingParams] | None = None, logprobs: bool = False,
    ) -> Any:
        """Generation from fresh prompts (the session is reset): token ids
        [batch, <= max_new_tokens], int64. ``max_new_tokens`` of 0 returns [batch, 0] and runs
        nothing; each prompt plus ``max_new_tokens`` - 1 tokens must fit the context, checked
        before anything runs.

        Greedy unless ``sampling`` (``inferx.runtime.sampling.SamplingParams``: one for every
        sequence, each drawing from its seed plus its row, or one per sequence) says otherwise;
        a seeded sequence draws the same tokens every time. With ``logprobs``, returns (token
        ids, their log-probabilities under the model's distribution [batch, n], float64; 0 after
        a sequence's EOS).

        With ``stop_at_eos``, a sequence that emits an EOS id (``eos_token_ids``, a token id or a
        list of them, else the model's) keeps emitting it, and generation ends once every sequence
        has (or the budget ends)."""
        budget = _count(max_new_tokens, "max_new_tokens", 0)
        if not isinstance(logprobs, (bool, np.bool_)):
            raise SessionError(f"logprobs must be True or False, got {_show(logprobs)}")
        if not isinstance(stop_at_eos, (bool, np.bool_)):
            raise SessionError(f"stop_at_eos must be True or False, got {_show(stop_at_eos)}")
        eos = (
            np.array(self.info.eos_token_ids, dtype=np.int64)
            if eos_token_ids is None
            else self.inputs.eos(eos_token_ids)
        )
        if not stop_at_eos:
            eos = eos[:0]
        ids, n = self.inputs.prompts(input_ids, None)
        try:
            params = per_row(sampling, len(ids))
        except SamplingError as e:
            raise SessionError(str(e)) from None
        self.inputs.room(n, np.full_like(n, max(budget - 1, 0)), f"generate with max_new_tokens {budget}")
        self.reset()
        if budget == 0:
            empty = np.zeros((len(ids), 0), dtype=np.int64)
            return (empty, np.zeros((len(ids), 0))) if logprobs else empty
        penalized = any(p.repetition_penalty != 1.0 for p in params)
        # the tokens each sequence holds, for the repetition penalty alone
        held = [list(row[:k]) if penalized else [] for row, k in zip(ids.tolist(), n.tolist(), strict=True)]
        every = list(range(len(ids)))

        def pick(logits: Any, step: int) -> tuple[np.ndarray, np.ndarray]:
            return draw(logits, every, [np.asarray(h, dtype=np.int64) for h in held], params, [step] * len(every),
                        [logprobs] * len(every))

        nxt, lp = pick(self.prefill(ids, n.tolist(), logits="last"), 0)
        out, lps = [nxt], [lp]
        done = np.isin(nxt, eos)
        for step_index in range(1, budget):
            if eos.size and done.all():
                break
            if penalized:
                for h, t in zip(held, nxt.tolist(), strict=True):
                    h.append(t)
            step, lp = pick(self.decode(nxt[:, None]), step_index)
            nxt = np.where(done, nxt, step)
            lps.append(np.where(done, 0.0, lp))
            done |= np.isin(nxt, eos)
            out.append(nxt)
        tokens = np.stack(out, axis=1).astype(np.int64)
        return (tokens, np.stack(lps, axis=1)) if logprobs else tokens
