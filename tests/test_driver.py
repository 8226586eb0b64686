"""The compile driver: it leaves the caller's Program alone and dumps the IR between phases."""

from __future__ import annotations

from pathlib import Path

import torch
import transformers as T

import inferx


def test_compile_keeps_the_program_and_dumps_ir(tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    program = inferx.import_model(T.LlamaForCausalLM(cfg).eval())
    before = str(program.module)
    lines: list[str] = []
    inferx.compile(program, target="cpu", output=tmp_path / "a", max_seq_len=16, max_batch=1,
                   dump_ir=tmp_path / "ir", progress=lines.append)
    assert str(program.module) == before, "compile rewrote the caller's Program"
    dumped = sorted(p.name for p in (tmp_path / "ir").iterdir())
    assert dumped == ["1-import.mlir", "2-cleanup.mlir", "3-merge-gemms.mlir", "4-fuse.mlir", "5-plan-memory.mlir"]
    assert "ix.kernel" in (tmp_path / "ir" / "4-fuse.mlir").read_text()
    assert [ln[:5] for ln in lines if ln.startswith("[")][:3] == ["[1/9]", "[2/9]", "[3/9]"]
