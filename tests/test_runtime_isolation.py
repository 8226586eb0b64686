"""A CPU session loads and runs an artifact without importing the compiler (no xDSL, no
frontend, no transformers): checked in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch
import transformers as T

import inferx


def test_session_imports_nothing_of_the_compiler(tmp_path: Path) -> None:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    art = inferx.compile(T.LlamaForCausalLM(cfg).eval(), target="cpu", output=tmp_path / "a.ixa",
                         dtype="fp32", max_seq_len=16, max_batch=1)
    code = (
        "import sys, inferx\n"
        f"s = inferx.load({str(art)!r}, device='cpu')\n"
        "print(s.generate([[1, 2, 3]], 2).tolist())\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('xdsl', 'transformers', 'gguf')\n"
        "             or m.startswith('inferx.compiler') or m.startswith('inferx.models'))\n"
        "print('IMPORTED', bad)\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "IMPORTED []" in proc.stdout, proc.stdout
