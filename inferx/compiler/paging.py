"""A program's KV cache paged: the page-kv pass with the compiled context's geometry, and the
program's ModelInfo saying so (what sessions and the manifest read)."""

from __future__ import annotations

import dataclasses

from inferx.passes.page_kv import PageKV
from inferx.passes.pipeline import PassManager
from inferx.program import Program
from inferx.runtime.kv_blocks import Paging


def paging_for(block_size: int, blocks: int | None, max_seq_len: int, max_batch: int) -> Paging:
    """The geometry of a pool of ``block_size``-position blocks for sequences of ``max_seq_len``:
    ``blocks`` blocks, or as many as ``max_batch`` sequences at their longest take."""
    per_seq = -(-max_seq_len // block_size)
    return Paging(block_size, max_batch * per_seq if blocks is None else blocks, per_seq)


def page_program(program: Program, paging: Paging) -> Program:
    """``program`` with its KV caches paged as ``paging`` says (in place; returned for chaining)."""
    assert program.info is not None, "paging a program with no decoder entry points"
    PassManager([PageKV(paging.block_size, paging.blocks, paging.blocks_per_seq)]).run(program.module)
    program.info = dataclasses.replace(program.info, kv_paging=paging)
    return program
