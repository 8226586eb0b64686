"""Compile-side inputs from untrusted sources, each refused with one error naming the file, the
field and the value: safetensors headers, HF configs, GGUF metadata and tables, IR text and
tuning records. Nothing here builds a model's IR before its sizes are checked, and nothing hangs.

Checkpoint shard names and non-object config files are covered in test_hardening_compile.py."""

from __future__ import annotations

import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from gguf_files import finish, llama_shapes

import inferx
from inferx.compiler.database import DEFAULT_ROOT, Database
from inferx.compiler.frontend.weights import WeightError, read_safetensors_header
from inferx.compiler.ir.symbolic import DimSyntaxError, parse_dim
from inferx.compiler.ir.textio import IRError, parse_module, verify_module
from inferx.models.config import ConfigError
from inferx.models.registry import decoder_config

# --- safetensors headers -------------------------------------------------------------------------


def _safetensors(path: Path, header: dict[str, Any], data: bytes = b"\0" * 64, n: int | None = None) -> Path:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw) if n is None else n) + raw + data)
    return path


def _f32(begin: int, end: int, shape: list[Any] | None = None, dtype: str = "F32") -> dict[str, Any]:
    return {"dtype": dtype, "shape": [(end - begin) // 4] if shape is None else shape, "data_offsets": [begin, end]}


@pytest.mark.parametrize(
    "header, names",
    [
        ({"a": _f32(0, 16), "b": _f32(8, 24)}, ["'a'", "'b'", "overlap"]),
        ({"a": _f32(0, 16, [4]) | {"data_offsets": [-16, 0]}}, ["'a'", "data_offsets", "[-16, 0]"]),
        ({"a": _f32(0, 16, [4]) | {"data_offsets": [16, 0]}}, ["'a'", "data_offsets", "[16, 0]"]),
        ({"a": _f32(0, 128)}, ["'a'", "ends at byte"]),
        ({"a": _f32(0, 16, [4], dtype="F16")}, ["'a'", "F16", "needs 8"]),
        ({"a": _f32(0, 16, [-4, -1])}, ["'a'", "shape", "[-4, -1]"]),
        ({"a": _f32(0, 0, [2**62, 2**62, 4])}, ["'a'", "shape", str(2**62)]),
        ({"a": _f32(0, 0, [2**31, 2**31, 2**31])}, ["'a'", "0 bytes", "needs"]),
        ({"a": _f32(0, 0, [0, 2**70])}, ["'a'", "shape"]),
        ({"a": _f32(0, 16, [True])}, ["'a'", "shape"]),
        ({"a": [1, 2]}, ["'a'", "not an object"]),
        ({"a": _f32(0, 16, dtype="Q7")}, ["'a'", "dtype 'Q7'"]),
        ({"__metadata__": [1], "a": _f32(0, 16)}, ["__metadata__"]),
    ],
    ids=[
        "overlap",
        "negative",
        "misordered",
        "outside",
        "dtype-length",
        "negative-dims",
        "absurd-dims",
        "wrapping-product",
        "zero-times-absurd",
        "bool-dim",
        "entry-list",
        "dtype",
        "metadata",
    ],
)
def test_safetensors_header_is_refused(tmp_path: Path, header: dict[str, Any], names: list[str]) -> None:
    path = _safetensors(tmp_path / "model.safetensors", header)
    with pytest.raises(WeightError) as info:
        read_safetensors_header(path)
    for name in [str(path), *names]:
        assert name in str(info.value), (name, str(info.value))


def test_safetensors_header_length_over_the_cap(tmp_path: Path) -> None:
    path = _safetensors(tmp_path / "model.safetensors", {}, n=2**40)
    with pytest.raises(WeightError, match=r"header of 1099511627776 bytes is over the 100000000-byte cap"):
        read_safetensors_header(path)


def test_safetensors_tensors_side_by_side_are_read(tmp_path: Path) -> None:
    path = _safetensors(tmp_path / "model.safetensors", {"a": _f32(0, 16), "b": _f32(16, 32), "e": _f32(8, 8)})
    assert {k: e.nbytes for k, e in read_safetensors_header(path).items()} == {"a": 16, "b": 16, "e": 0}


# --- HF configs ----------------------------------------------------------------------------------

LLAMA = dict(
    model_type="llama",
    vocab_size=96,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)


@pytest.mark.parametrize(
    "edit, names",
    [
        ({"num_hidden_layers": 10**9}, ["num_hidden_layers=1000000000", "1..1024"]),
        ({"num_attention_heads": 0}, ["num_attention_heads=0"]),
        ({"num_attention_heads": -4}, ["num_attention_heads=-4"]),
        ({"num_attention_heads": 5, "num_key_value_heads": 5}, ["num_attention_heads=5", "hidden_size=64"]),
        ({"num_hidden_layers": "two"}, ["num_hidden_layers='two'", "integer"]),
        ({"num_hidden_layers": "1"}, ["num_hidden_layers='1'", "integer"]),
        ({"num_hidden_layers": 1.5}, ["num_hidden_layers=1.5"]),
        ({"num_hidden_layers": True}, ["num_hidden_layers=True"]),
        ({"vocab_size": 10**15}, ["vocab_size=1000000000000000"]),
        ({"hidden_size": 2**40}, ["hidden_size=1099511627776"]),
        ({"max_position_embeddings": 10**12}, ["max_position_embeddings=1000000000000"]),
        ({"rms_norm_eps": float("nan")}, ["rms_norm_eps=nan"]),
        ({"rms_norm_eps": -1.0}, ["rms_norm_eps=-1.0"]),
        ({"eos_token_id": "2"}, ["eos_token_id='2'"]),
        ({"eos_token_id": [1, "x"]}, ["eos_token_id=[1, 'x']"]),
        ({"eos_token_id": -1}, ["eos_token_id=-1"]),
        ({"eos_token_id": 2**31}, ["eos_token_id", "2147483648"]),
        ({"bos_token_id": "x"}, ["bos_token_id='x'"]),
        ({"rope_theta": "big"}, ["rope_theta='big'"]),
        ({"rope_theta": -1}, ["rope_theta=-1"]),
        ({"rope_scaling": [1, 2]}, ["rope_scaling=[1, 2]"]),
        ({"rope_parameters": {"rope_type": "linear", "factor": "2"}}, ["rope_parameters", "factor='2'"]),
        ({"layer_types": "full_attention"}, ["layer_types='full_attention'"]),
        ({"tie_word_embeddings": "false"}, ["tie_word_embeddings='false'"]),
        ({"model_type": "mistral", "sliding_window": -5}, ["sliding_window=-5"]),
    ],
    ids=lambda v: None,
)
def test_config_field_is_refused(edit: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        decoder_config({**LLAMA, **edit}, "/ckpt/config.json")
    for name in ["/ckpt/config.json", *names]:
        assert name in str(info.value), (name, str(info.value))


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    import transformers as T

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("llama") / "model"
    T.LlamaForCausalLM(T.LlamaConfig(**{k: v for k, v in LLAMA.items() if k != "model_type"})).save_pretrained(path)
    return path


def _with_config(src: Path, dst: Path, **edit: Any) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).symlink_to(f)
    (dst / "config.json").unlink()
    (dst / "config.json").write_text(json.dumps({**json.loads((src / "config.json").read_text()), **edit}))
    return dst


def test_config_claiming_more_layers_than_the_weights(
    llama_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked against the checkpoint before any IR is built."""
    from inferx.compiler.frontend import hf

    def no_build(cfg: object) -> None:
        raise AssertionError("the IR was built before the sizes were checked")

    monkeypatch.setattr(hf, "build_decoder_module", no_build)
    path = _with_config(llama_dir, tmp_path / "m", num_hidden_layers=1000)
    with pytest.raises(WeightError, match=r"1000 layers need weight 'model\.layers\.999\.input_layernorm\.weight'"):
        inferx.import_model(path)
    path = _with_config(llama_dir, tmp_path / "v", vocab_size=97)
    with pytest.raises(WeightError, match=r"embed_tokens\.weight' has shape \[96, 64\] but the config's vocab_size"):
        inferx.import_model(path)


def test_cli_names_config_field(llama_dir: Path, tmp_path: Path) -> None:
    from test_hardening_compile import assert_user_error, invoke

    path = _with_config(llama_dir, tmp_path / "m", eos_token_id="</s>")
    out = tmp_path / "x.ixa"
    result = invoke(["compile", str(path), "-o", str(out), "--target", "cpu", "--dtype", "fp32"])
    assert_user_error(result, "config.json", "eos_token_id='</s>'")
    assert not out.exists()


# --- GGUF ----------------------------------------------------------------------------------------


def _gguf(path: Path, **meta: Any) -> Path:
    """A one-layer llama GGUF; ``meta`` overrides (or with None removes) metadata ('.' spelled '__')."""
    import gguf

    hidden, heads, kv, inter, vocab = 64, 4, 2, 96, 128
    values: dict[str, Any] = {
        "llama.context_length": 256,
        "llama.embedding_length": hidden,
        "llama.block_count": 1,
        "llama.feed_forward_length": inter,
        "llama.attention.head_count": heads,
        "llama.attention.head_count_kv": kv,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
    }
    values.update({k.replace("__", "."): v for k, v in meta.items()})
    w = gguf.GGUFWriter(str(path), "llama")
    for key, v in values.items():
        if v is None:
            continue
        if isinstance(v, str):
            w.add_string(key, v)
        elif isinstance(v, float):
            w.add_float32(key, v)
        elif v >= 2**32:
            w.add_uint64(key, v)
        else:
            w.add_int32(key, v) if v < 0 else w.add_uint32(key, v)
    finish(w, llama_shapes(hidden, heads, kv, inter, vocab))
    return path


@pytest.mark.parametrize(
    "meta, names",
    [
        ({"llama__block_count": 10**9}, ["'llama.block_count' = 1000000000", "1..1024"]),
        ({"llama__block_count": 5}, ["5 layers need weight 'blk.4.attn_norm.weight'"]),
        ({"llama__attention__head_count": 0}, ["'llama.attention.head_count' = 0"]),
        ({"llama__attention__head_count": "4"}, ["'llama.attention.head_count' = '4'", "integer"]),
        ({"llama__attention__head_count": 5, "llama__attention__head_count_kv": 5}, ["head_count 5 does not divide"]),
        ({"llama__context_length": "big"}, ["'llama.context_length' = 'big'"]),
        ({"llama__attention__layer_norm_rms_epsilon": float("nan")}, ["layer_norm_rms_epsilon' = nan"]),
        ({"tokenizer__ggml__eos_token_id": "2"}, ["'tokenizer.ggml.eos_token_id' = '2'"]),
        ({"tokenizer__ggml__eos_token_id": 2**32 - 1}, ["eos", "4294967295"]),
        ({"llama__rope__freq_base": "x"}, ["'llama.rope.freq_base' = 'x'"]),
        ({"general__alignment": "64"}, ["general.alignment '64'"]),
        ({"general__alignment": 0}, ["general.alignment 0"]),
        ({"general__alignment": 48}, ["general.alignment 48", "power of two"]),
    ],
    ids=lambda v: None,
)
def test_gguf_metadata_is_refused(tmp_path: Path, meta: dict[str, Any], names: list[str]) -> None:
    path = _gguf(tmp_path / "m.gguf", **meta)
    with pytest.raises((ConfigError, WeightError)) as info:
        inferx.import_model(path)
    for name in [str(path), *names]:
        assert name in str(info.value), (name, str(info.value))


def _raw_gguf(path: Path, n_tensors: int, n_kv: int, body: bytes) -> Path:
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_kv) + body + b"\0" * 64)
    return path


def _tensor_info(dims: list[int], qtype: int = 0, offset: int = 0) -> bytes:
    return (
        struct.pack("<Q", 1)
        + b"t"
        + struct.pack("<I", len(dims))
        + struct.pack(f"<{len(dims)}Q", *dims)
        + struct.pack("<IQ", qtype, offset)
    )


@pytest.mark.parametrize(
    "counts, body, names",
    [
        ((10**9, 0), b"", ["1000000000 tensors", "cannot fit"]),
        ((0, 10**9), b"", ["1000000000 metadata entries", "cannot fit"]),
        ((0, 1), struct.pack("<Q", 2**62) + b"abc", ["metadata key 0 runs past the end"]),
        ((0, 1), struct.pack("<Q", 1) + b"x" + struct.pack("<IIQ", 9, 0, 2**60), ["value of 'x' runs past the end"]),
        ((0, 1), struct.pack("<Q", 1) + b"x" + struct.pack("<I", 77), ["unknown value type 77"]),
        ((1, 0), _tensor_info([32], offset=2**62), ["tensor 't' ends at byte"]),
        ((1, 0), _tensor_info([32], qtype=999), ["tensor 't' has unknown GGML type 999"]),
        ((1, 0), _tensor_info([2**33, 2**33]), ["tensor 't' ends at byte"]),
        ((1, 0), _tensor_info([2**41, 0]), ["tensor 't' has dims"]),
    ],
    ids=[
        "tensors",
        "metadata",
        "long-string",
        "long-array",
        "value-type",
        "offset",
        "qtype",
        "dims-product",
        "dims-over-cap",
    ],
)
def test_gguf_table_is_refused(tmp_path: Path, counts: tuple[int, int], body: bytes, names: list[str]) -> None:
    path = _raw_gguf(tmp_path / "m.gguf", *counts, body)
    with pytest.raises(WeightError) as info:
        inferx.import_model(path)
    for name in [str(path), *names]:
        assert name in str(info.value), (name, str(info.value))


# --- IR text -------------------------------------------------------------------------------------


def _ir_error(text: str) -> str:
    with pytest.raises(IRError) as info:
        module, source = parse_module(text, "x.mlir")
        verify_module(module, source)
    return str(info.value)


def _arg(dim: str) -> str:
    return f"func.func @f(%x: !ix.tensor<[{dim}, 64], f32>) {{\n  func.return\n}}\n"


T, W = "!ix.tensor<[seq, 64], f32>", "!ix.tensor<[64], f32>"


def _rmsnorm(eps: str, t: str = T, w: str = W) -> str:
    return (
        f"func.func @f(%x: {t}, %w: {w}) {{\n  %0 = ix.rmsnorm %x, %w {{eps = {eps} : f64}} : ({t}, {w}) -> {t}\n"
        "  func.return\n}\n"
    )


@pytest.mark.parametrize(
    "text, names",
    [
        (_arg("-4"), ["x.mlir:1:1", "tensor dim #0 is -4"]),
        (_arg("0 - seq"), ["tensor dim #0 is -seq", "negative"]),
        (_arg("99999999999999999999"), ["x.mlir:1:", "over the largest dim"]),
        (_arg("9" * 5000), ["x.mlir:1:", "integer literal too long"]),
        (_rmsnorm("0x7FF8000000000000"), ["x.mlir:2:3", "ix.rmsnorm", "'eps'", "nan"]),
        (_rmsnorm("0x7FF0000000000000"), ["x.mlir:2:3", "ix.rmsnorm", "eps must be positive", "inf"]),
        (_rmsnorm("-1.0e-05"), ["ix.rmsnorm", "eps must be positive", "-1e-05"]),
        (_rmsnorm("1.0e-05", "!ix.tensor<[seq, 0], f32>", "!ix.tensor<[0], f32>"), ["ix.rmsnorm", "must not be 0"]),
    ],
    ids=[
        "negative-dim",
        "negative-symbolic-dim",
        "huge-dim",
        "huge-literal",
        "nan-eps",
        "inf-eps",
        "negative-eps",
        "zero-sized-norm",
    ],
)
def test_ir_values_are_refused(text: str, names: list[str]) -> None:
    msg = _ir_error(text)
    for name in names:
        assert name in msg, (name, msg)


@pytest.mark.parametrize(
    "text",
    [
        _arg("(" * 5000 + "seq" + ")" * 5000),
        "func.func @f() attributes {a = " + "[" * 5000 + "]" * 5000 + "} {\n  func.return\n}\n",
        "func.func @f() attributes {a = " + "{b = " * 3000 + "1" + "}" * 3000 + "} {\n  func.return\n}\n",
        "func.func @f(%x: " + "tuple<" * 3000 + "i32" + ">" * 3000 + ") {\n  func.return\n}\n",
        '"builtin.module"() ({\n' * 3000 + "})" * 3000,
    ],
    ids=["dim-parens", "arrays", "dicts", "types", "regions"],
)
def test_deep_nesting_is_an_ir_error(text: str) -> None:
    assert "nested more than 64 deep" in _ir_error(text)


@pytest.mark.parametrize(
    "literal",
    ['"' + "x" * 60, '"a\\q"', '"' + "x" * 40 + "\n" + '"'],
    ids=["not-closed", "unknown-escape", "newline-inside"],
)
def test_a_string_literal_not_closed_is_refused_at_once(literal: str) -> None:
    """The lexer's pattern backtracks exponentially on such a literal: 60 characters took minutes."""
    start = time.process_time()
    msg = _ir_error("func.func @f() attributes {a = " + literal + "} {\n  func.return\n}\n")
    assert "x.mlir:1:32" in msg and "string literal not closed" in msg
    assert time.process_time() - start < 5


def test_string_literals_with_escapes_parse() -> None:
    literal = '"q\\"x\\n\\t\\\\\\41 // not a comment"'
    module, _ = parse_module("func.func @f() attributes {a = " + literal + "} {\n  func.return\n}\n")
    assert '"q\\22x\\0A\\09\\\\A // not a comment"' in str(module)


def test_a_value_used_before_it_is_defined_is_refused() -> None:
    """The parser takes ``%a = ix.add %a, ...``; a pass deleting it then raised from xDSL."""
    t = "!ix.tensor<[4], f32>"
    text = f"func.func @f(%x: {t}) {{\n  %a = ix.add %a, %x : ({t}, {t}) -> {t}\n  func.return\n}}\n"
    msg = _ir_error(text)
    assert "x.mlir:2:3" in msg and "ix.add: operand #0 is used before it is defined" in msg


def test_an_integer_type_too_wide_is_refused_at_once() -> None:
    """The parser builds a type's value range eagerly: i2147483648 ran out of memory."""
    msg = _ir_error("func.func @f() attributes {a = array<i2147483648: 1>} {\n  func.return\n}\n")
    assert "x.mlir:1:38" in msg and "integer type i2147483648 is wider than 128 bits" in msg
    assert parse_module("func.func @f() attributes {a = array<i64: 1>, b = 1 : si8} {\n  func.return\n}\n")


def test_long_dim_expressions_are_refused_at_once() -> None:
    """The canonical form's cost is quadratic in a dim's terms: 20000 terms took minutes."""
    assert "at most 64 factors" in _ir_error(_arg(" + ".join(f"s{i}" for i in range(20000))))
    assert parse_module(_arg(" + ".join(f"s{i}" for i in range(60))))[0] is not None
    assert parse_module(_arg("-" * 5000 + "seq"))[0] is not None  # unary minus is a loop, not recursion
    with pytest.raises(DimSyntaxError, match="more than 256 tokens"):
        parse_dim(" + ".join(f"s{i}" for i in range(20000)))
    with pytest.raises(DimSyntaxError, match="deeper than 8"):
        parse_dim("(" * 100 + "seq" + ")" * 100)
    with pytest.raises(DimSyntaxError, match="too large"):
        parse_dim("9" * 5000)
    assert str(parse_dim("-" * 101 + "seq")) == "-seq"


@pytest.mark.thorough  # scale, not a new path: outside CI's run
def test_twenty_thousand_ops_parse_and_verify() -> None:
    """Linear in the ops (a quadratic step would take minutes at this size)."""
    lines = [f"func.func @f(%x: {T}) -> {T} {{"]
    prev = "%x"
    for i in range(20000):
        lines.append(f"  %{i} = ix.add {prev}, %x : ({T}, {T}) -> {T}")
        prev = f"%{i}"
    lines += [f"  func.return {prev} : {T}", "}"]
    module, source = parse_module("\n".join(lines))
    verify_module(module, source)


# --- tuning records ------------------------------------------------------------------------------


@pytest.fixture
def record_line() -> dict[str, Any]:
    return json.loads((DEFAULT_ROOT / "h200" / "gemm.jsonl").read_text().splitlines()[0])


def test_tuning_records_are_checked_on_reading(tmp_path: Path, record_line: dict[str, Any]) -> None:
    g = record_line
    lines = [
        "[1, 2]",
        '"x"',
        "42",
        json.dumps({**g, "schedule": "abc"}),
        json.dumps({**g, "times_ms": "12"}),
        json.dumps({**g, "median_ms": "fast"}),
        json.dumps({**g, "schedule": {**g["schedule"], "bm": 3}}),
        json.dumps({**g, "schedule": {**g["schedule"], "num_warps": 4.0}}),
        json.dumps({**g, "date": 5}),
        "[" * 100000,
        json.dumps({**g, "schedule": {**g["schedule"], "bm": 1 << 20, "bn": 1 << 20, "bk": 1 << 20}}),
        json.dumps({**g, "median_ms": -1}),
        json.dumps(g),
    ]
    folder = tmp_path / "h200"
    folder.mkdir()
    path = folder / "gemm.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (folder / "other.jsonl").write_bytes(b"\xff\xfe\n")
    db = Database.load(tmp_path, "h200")
    assert len(db.records) == 1
    want = {
        1: "a list, not a JSON object",
        2: "a string",
        3: "a number",
        4: "schedule='abc'",
        5: "times_ms='12'",
        6: "median_ms='fast'",
        7: "tile sizes must be powers of two",
        8: "'num_warps': 4.0",
        9: "date=5",
        10: "nested too deeply",
        11: "tile dims must be at most 1024",
        12: "median_ms=-1 must be a positive number",
    }
    for n, text in want.items():
        assert any(p.startswith(f"{path}:{n}: ") and text in p for p in db.problems), (n, db.problems)
    assert any(p.startswith(f"{folder / 'other.jsonl'}:1: ") and "utf-8" in p for p in db.problems)
    lines_said = db.problem_lines(shown=2)
    assert lines_said[0] == "tuning database: skipped 13 of 14 records"
    assert lines_said[-1] == "tuning database: ... and 11 more"


def test_tuning_database_path_that_is_a_fifo(tmp_path: Path, record_line: dict[str, Any]) -> None:
    """A FIFO would block the reader forever: it is refused without being opened for a read."""
    folder = tmp_path / "h200"
    folder.mkdir()
    os.mkfifo(folder / "attention.jsonl")
    (folder / "gemm.jsonl").write_text(json.dumps(record_line) + "\n")
    db = Database.load(tmp_path, "h200")
    assert len(db.records) == 1
    assert db.problems == [f"{folder / 'attention.jsonl'}: not a regular file"]


def test_compile_reports_skipped_records(tmp_path: Path) -> None:
    from inferx.compiler.options import CompileOptions
    from inferx.compiler.schedules import tuning_database

    (tmp_path / "h200").mkdir()
    (tmp_path / "h200" / "gemm.jsonl").write_text("[1]\n")
    said: list[str] = []
    tuning_database(CompileOptions(target="h200", tuning_logs=tmp_path), said.append)
    assert said == [
        "        tuning database: skipped 1 of 1 records",
        f"        tuning database: skipped {tmp_path / 'h200' / 'gemm.jsonl'}:1: not a record: a list, "
        "not a JSON object",
    ]
