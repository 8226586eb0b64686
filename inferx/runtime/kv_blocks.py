"""A paged KV cache's blocks: which sequence row holds which blocks, and who else holds them.

An artifact compiled with ``kv_block_size`` keeps each layer's K and V in a pool of ``blocks``
blocks of ``block_size`` positions (``inferx.passes.page_kv``); a block table [rows,
blocks_per_seq] of int32 says which block holds positions ``[j * B, (j + 1) * B)`` of each row.
The session gives a row blocks as its sequence grows (``cover``) and takes them back when the row
is released; a block may be held by several rows at once (a shared prompt prefix) and by the
engine's prefix cache, so blocks carry reference counts and go back to the free list at zero.

Shared blocks are full blocks of a prompt: a sequence only writes positions at or past its own
length, so no row ever writes a block it shares, and no block needs copying on write.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

UNSET = -1  # a table entry with no block


@dataclass(frozen=True)
class Paging:
    """A paged cache's geometry: ``blocks`` of ``block_size`` positions in the pool, a table row of
    ``blocks_per_seq`` entries per sequence (the compiled context over the block size, rounded up)."""

    block_size: int
    blocks: int
    blocks_per_seq: int

    def blocks_for(self, tokens: int) -> int:
        """The blocks ``tokens`` positions take."""
        return -(-int(tokens) // self.block_size)


class PoolFull(RuntimeError):
    """Every block of the pool is held."""


class BlockPool:
    """The blocks of one paged cache (every layer's K and V share one numbering) and the table of
    ``rows`` sequence rows."""

    def __init__(self, paging: Paging, rows: int):
        self.paging = paging
        self.table = np.full((rows, paging.blocks_per_seq), UNSET, dtype=np.int32)
        self.refs = np.zeros(paging.blocks, dtype=np.int64)
        self._free = list(range(paging.blocks))  # a heap: the lowest free block first

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def held(self) -> int:
        return self.paging.blocks - len(self._free)

    def row_blocks(self, row: int) -> list[int]:
        """The blocks ``row`` holds, in position order."""
        r = self.table[row]
        return [int(b) for b in r[r != UNSET]]

    def cover(self, row: int, tokens: int) -> None:
        """Gives ``row`` blocks for its first ``tokens`` positions (those it lacks, from the free
        list). PoolFull, taking nothing, if the free blocks are too few."""
        need = self.paging.blocks_for(tokens)
        if need > self.paging.blocks_per_seq:
            raise ValueError(f"{tokens} positions need {need} blocks; a table row holds {self.paging.blocks_per_seq}")
        missing = [j for j in range(need) if self.table[row, j] == UNSET]
        if len(missing) > len(self._free):
            raise PoolFull(f"row {row} needs {len(missing)} more blocks of {self.paging.block_size} positions for "
                           f"{tokens} tokens; {len(self._free)} of the pool's {self.paging.blocks} are free")
        for j in missing:
            self.table[row, j] = self.take()

    def take(self) -> int:
        """A free block, held once."""
        if not self._free:
            raise PoolFull(f"all {self.paging.blocks} blocks of the pool are held")
        b = heapq.heappop(self._free)
        self.refs[b] = 1
        return b

    def hold(self, blocks: Iterable[int]) -> None:
        """One more holder for each of ``blocks`` (each held already)."""
        for b in blocks:
            assert self.refs[b] > 0, f"block {b} is free"
            self.refs[b] += 1

    def drop(self, blocks: Iterable[int]) -> None:
        """One holder less for each of ``blocks``; a block nobody holds is free again."""
        for b in blocks:
            assert self.refs[b] > 0, f"block {b} is free already"
            self.refs[b] -= 1
            if self.refs[b] == 0:
                heapq.heappush(self._free, int(b))

    def share(self, row: int, blocks: Sequence[int]) -> None:
        """``row``, holding no block, starts with ``blocks`` (held by others too) as its first."""
        assert not self.row_blocks(row), f"row {row} holds blocks already"
        self.hold(blocks)
        self.table[row, : len(blocks)] = blocks

    def release(self, row: int) -> None:
        """``row`` holds no block any more."""
        self.drop(self.row_blocks(row))
        self.table[row] = UNSET

    def place(self, row: int, count: int) -> list[int]:
        """``row``, holding no block, takes ``count`` fresh blocks as its first (a preempted row
        coming back); PoolFull, taking nothing, if too few are free."""
        assert not self.row_blocks(row), f"row {row} holds blocks already"
        if count > len(self._free):
            raise PoolFull(f"{count} blocks asked for; {len(self._free)} of {self.paging.blocks} are free")
        blocks = [self.take() for _ in range(count)]
        self.table[row, :count] = blocks
        return blocks
