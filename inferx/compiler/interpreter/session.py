"""The reference Session: runs a Program's IR with the interpreter. The oracle every compiled
session is compared with."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from inferx.runtime.session import DecoderSession, SessionError


class _Cached(Mapping[str, np.ndarray]):
    """Reads each weight once (a dequantized or widened weight is not recomputed every step)."""

    def __init__(self, inner: Mapping[str, np.ndarray]):
        self.inner, self.cache = inner, {}  # type: ignore[var-annotated]

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self.cache:
            self.cache[key] = np.asarray(self.inner[key])
        return self.cache[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.inner)

    def __len__(self) -> int:
        return len(self.inner)


class ReferenceSession(DecoderSession):
    def __init__(self, program: Any, *, max_batch: int = 8, max_context: int | None = None):
        from inferx.compiler.interpreter import Interpreter
        from inferx.compiler.interpreter.numerics import STORAGE
        from inferx.compiler.ir.types import DType

        info = program.info
        if info is None:
            raise SessionError("this program has no decoder entry points (prefill/decode)")
        context = min(info.max_context, 4096) if max_context is None else max_context
        super().__init__(info, max_batch=max_batch, max_context=context)
        self.interpreter = Interpreter(program.module, _Cached(program.weights))
        self.entry_points = frozenset(self.interpreter.funcs)
        self.cache_dtype = STORAGE[DType(info.cache_dtype)]
        self.caches: list[np.ndarray] = []

    def _reset_cache(self, batch: int) -> None:
        shape = self.info.cache_shape(batch, self.max_context)
        self.caches = [np.zeros(shape, dtype=self.cache_dtype) for _ in range(2 * self.info.num_layers)]

    def _step(
        self,
        entry: str,
        input_ids: np.ndarray,
        positions: np.ndarray,
        kv_lens: np.ndarray,
        rows: np.ndarray | None = None,
    ) -> np.ndarray:
        n = input_ids.shape[0]
        # a paged cache's pools are whole whatever the rows; a contiguous one's first n rows
        whole = self.pages is not None or not self.caches or n == self.caches[0].shape[0]
        table = [self.block_table(n)] if self.pages is not None else []
        outs = self.interpreter.run(
            entry,
            input_ids.astype(np.int32),
            positions.astype(np.int32),
            kv_lens.astype(np.int32),
            *table,
            *(self.caches if whole else [c[:n] for c in self.caches]),
        )
        if whole:
            self.caches = list(outs[1:])
        else:  # the first n rows of held rows (step_rows): the others stay as they are
            for c, new in zip(self.caches, outs[1:], strict=True):
                c[:n] = new
        logits = np.asarray(outs[0])
        return logits if rows is None else logits.reshape(-1, logits.shape[-1])[rows][:, None]


    def _row_caches(self, row: int) -> list[Any]:
        return [np.array(c[row]) for c in self.caches]

    def _set_row_caches(self, row: int, saved: list[Any]) -> None:
        for c, v in zip(self.caches, saved, strict=True):
            c[row] = v

    def _block_caches(self, blocks: list[int]) -> list[Any]:
        return [np.array(c[blocks]) for c in self.caches]

    def _set_block_caches(self, blocks: list[int], saved: list[Any]) -> None:
        for c, v in zip(self.caches, saved, strict=True):
            c[blocks] = v


def reference_session(program: Any, **options: Any) -> ReferenceSession:
    return ReferenceSession(program, **options)
