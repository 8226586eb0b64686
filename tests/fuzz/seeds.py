"""The valid inputs every mutation starts from, built once per run into one directory:

- ``hf/``: a tiny Llama checkpoint (config.json, one model.safetensors);
- ``sharded/``: the same model in three shards with a ``model.safetensors.index.json``;
- ``tiny.gguf``: a 1-layer llama GGUF with F32 weights and a vocabulary (``gguf.GGUFWriter``);
- ``art/`` and ``art.ixa``: the checkpoint compiled for the CPU, directory and packed;
- ``outside.safetensors``: a valid shard outside every model directory (an index may name it);
- ``tuning/h200/*.jsonl``: the first records of each shipped tuning file;
- the IR chunks of ``tests/filecheck`` (read from the checkout, not copied).

The model's weights come from a fixed torch seed and compiling is byte-identical, so a base
built anywhere gives the same mutated inputs for the same seed."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FILECHECK = REPO / "tests" / "filecheck"
TUNING = REPO / "tuning_logs" / "h200"
VOCAB, MAX_SEQ_LEN, MAX_BATCH = 32, 8, 2
TUNING_LINES = 12
DONE = "bases.done"


@dataclass(frozen=True)
class IRChunk:
    """One module of a filecheck file and the pipeline its RUN line runs."""

    name: str  # file:chunk
    text: str
    pipeline: str


@dataclass(frozen=True)
class Bases:
    root: Path

    @property
    def hf(self) -> Path:
        return self.root / "hf"

    @property
    def sharded(self) -> Path:
        return self.root / "sharded"

    @property
    def gguf(self) -> Path:
        return self.root / "tiny.gguf"

    @property
    def art(self) -> Path:
        return self.root / "art"

    @property
    def ixa(self) -> Path:
        return self.root / "art.ixa"

    @property
    def outside(self) -> Path:
        return self.root / "outside.safetensors"

    @property
    def tuning(self) -> Path:
        return self.root / "tuning"


def build(root: Path) -> Bases:
    """The bases under ``root`` (kept when a finished build is there already)."""
    bases = Bases(root)
    if (root / DONE).exists():
        return bases
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    import torch
    import transformers as T

    import inferx
    from inferx.runtime.artifact_write import pack

    torch.manual_seed(0)
    cfg = T.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16,
        eos_token_id=2,
        bos_token_id=1,
    )
    model = T.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(bases.hf, safe_serialization=True)
    model.save_pretrained(bases.sharded, safe_serialization=True, max_shard_size=2500)
    shutil.copyfile(bases.hf / "model.safetensors", bases.outside)
    inferx.compile(bases.hf, target="cpu", output=bases.art, dtype="fp32", max_seq_len=MAX_SEQ_LEN, max_batch=MAX_BATCH)
    pack(bases.art, bases.ixa)
    _write_gguf(bases.gguf)
    (bases.tuning / "h200").mkdir(parents=True)
    for src in sorted(TUNING.glob("*.jsonl")):
        lines = src.read_bytes().splitlines(keepends=True)[:TUNING_LINES]
        (bases.tuning / "h200" / src.name).write_bytes(b"".join(lines))
    (root / DONE).write_text("ok\n")
    return bases


def _write_gguf(path: Path) -> None:
    import gguf

    from tests.gguf_files import add_llama_metadata, finish, llama_shapes

    hidden, heads, kv, inter, vocab = 16, 2, 1, 24, VOCAB
    w = gguf.GGUFWriter(str(path), "llama")
    add_llama_metadata(w, context=64, hidden=hidden, heads=heads, kv=kv, inter=inter)
    w.add_eos_token_id(2)
    w.add_bos_token_id(1)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([1] * vocab)
    finish(w, llama_shapes(hidden, heads, kv, inter, vocab))


_RUN = re.compile(r"//\s*RUN:.*?-p\s+(\"[^\"]*\"|'[^']*'|\S+)")


def ir_chunks() -> list[IRChunk]:
    """Every module of every filecheck file (its comments and CHECK lines left out), with the pipeline
    of its file's RUN line."""
    chunks = []
    for path in sorted(FILECHECK.rglob("*.mlir")):
        if "Output" in path.parts:
            continue
        text = path.read_text()
        m = _RUN.search(text)
        pipeline = m.group(1).strip("\"'") if m else ""
        for i, chunk in enumerate(re.split(r"(?m)^// -----\s*$", text)):
            code = "\n".join(line for line in chunk.split("\n") if not line.lstrip().startswith("//"))
            if code.strip():
                chunks.append(IRChunk(f"{path.relative_to(REPO)}:{i}", code.strip() + "\n", pipeline))
    return chunks


def tuning_tasks(bases: Bases) -> list[dict]:
    """The task of each base tuning record, as stored."""
    return [json.loads(line)["task"] for f in sorted((bases.tuning / "h200").glob("*.jsonl")) for line in f.open()]
