"""The `inferx` commands (compile, run, inspect) and `inferx-compile`: in-process through click's
CliRunner, and once through the installed console scripts. User errors exit 1 with one line on
stderr that names the thing at fault, and never a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as T
from click.testing import CliRunner, Result

import inferx
from inferx.cli import main
from inferx.compiler.options import TARGETS
from inferx.inspect_report import _layer_span
from inferx.runtime.manifest import ArgSpec, Binding, EntryPlan, LaunchStep

CPU_FLAGS = ["--target", "cpu", "--dtype", "fp32", "--max-seq-len", "32", "--max-batch", "2"]
VOCAB = 96


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    path = tmp_path_factory.mktemp("cli") / "tiny-llama"
    T.LlamaForCausalLM(cfg).eval().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def compiled(model_dir: Path) -> tuple[Path, Result]:
    out = model_dir.parent / "tiny.ixa"
    result = invoke(["compile", str(model_dir), "-o", str(out), *CPU_FLAGS])
    return out, result


@pytest.fixture(scope="module")
def with_tokenizer(model_dir: Path) -> Path:
    """An artifact compiled from a Program that carries a word-level tokenizer (w0 ... w95), no
    chat template."""
    program = inferx.import_model(model_dir)
    program.tokenizer = _word_tokenizer(chat=False)
    return inferx.compile(program, target="cpu", output=model_dir.parent / "tok.ixa", dtype="fp32",
                          max_seq_len=32, max_batch=2)


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def assert_user_error(result: Result, *names: str) -> None:
    """Exit 1, one line on stderr, naming each of ``names``, no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.stderr
    assert all(not line.startswith("error") for line in lines[:-1]), result.stderr
    assert "Traceback" not in result.output
    for name in names:
        assert name in lines[-1], (name, lines[-1])


# --- compile --------------------------------------------------------------------------------


def test_compile_prints_progress_and_the_artifact(compiled: tuple[Path, Result]) -> None:
    out, result = compiled
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)
    for phase in ("[1/9] import", "[4/9] fuse", "[6/9] codegen", "[9/9] wrote"):
        assert phase in result.stderr
    assert "no tokenizer" in result.stderr
    assert out.is_file()


def test_compile_help_lists_the_drivers_targets() -> None:
    result = invoke(["compile", "--help"])
    assert result.exit_code == 0
    for target in TARGETS:
        assert target in result.output


@pytest.mark.parametrize("args, names", [
    (["compile", "no/such/model", "-o", "x.ixa"], ["no/such/model", "no such file"]),
    (["compile", "{model}", "-o", "x.ixa", "--target", "h300"], ["'h300'", "h200, h100, sm_90, cpu"]),
    (["compile", "{model}", "-o", "x.ixa", "--dtype", "int4"], ["'int4'"]),
    (["compile", "{model}", "-o", "x.ixa", "--target", "cpu", "--dtype", "bf16", "--max-seq-len", "32"], ["bf16"]),
    (["compile", "{model}", "-o", "x.ixa", "--target", "cpu", "--max-seq-len", "4096"], ["4096"]),
    (["compile", "{model}/config.json", "-o", "x.ixa"], ["config.json", "HF model directory or a .gguf"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g48"], ["'int4-g48'", "int4-g128"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g128"], ["int4-g128", "K = 64"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant-head"], ["--quant-head", "int4 scheme"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g32", "--quant-override", "*down*"],
     ["--quant-override", "'*down*'", "PATTERN=PRECISION"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g32", "--quant-override", "*down*=int4-g48"],
     ["--quant-override", "'int4-g48'"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant-override", "*down*=float"],
     ["--quant-override", "int4 scheme"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g32", "--quant-override", "*q_proj*=int4-g128"],
     ["int4-g128", "q_proj", "K = 64"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "gguf"], ["quant gguf", "not a .gguf file"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "fp8", "--quant-method", "awq"],
     ["--quant-method", "int4 scheme", "fp8"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "auto"], ["--accuracy-budget"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "auto", "--accuracy-budget", "1"],
     ["no tokenizer"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "auto", "--accuracy-budget", "150%"],
     ["--accuracy-budget", "150%"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--fp8-activations", "minmax"],
     ["--fp8-activations", "FP8 linears"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g32", "--quant-method", "awq"],
     ["awq", "no tokenizer"]),
    (["compile", "{model}", "-o", "x.ixa", *CPU_FLAGS, "--quant", "int4-g32", "--quant-method", "gptq",
      "--calibration", "no-such.txt"], ["--calibration no-such.txt", "no such file"]),
])
def test_compile_user_errors(model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                             names: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert_user_error(invoke([a.format(model=model_dir) for a in args]), *names)
    assert not (tmp_path / "x.ixa").exists()


def test_compile_quant_writes_int4_weights(model_dir: Path, tmp_path: Path) -> None:
    """``--quant int4-g32 --quant-head``: every linear, the LM head included, stored as packed int4
    codes with their scales and minimums; the progress says how many."""
    out = tmp_path / "q.ixa"
    result = invoke(["compile", str(model_dir), "-o", str(out), *CPU_FLAGS, "--quant", "int4-g32", "--quant-head"])
    assert result.exit_code == 0, result.output
    assert "quant int4-g32: 15 linears in int4, by round-to-nearest (the LM head too)" in result.stderr
    manifest = inferx.runtime.artifact.load_artifact(out).manifest["weights"]
    codes = sorted(n for n, w in manifest.items() if w["dtype"] == "i4")  # fewer than 15 where linears merge
    assert any(n.startswith("lm_head.") for n in codes), codes
    # inspect lists each int4 weight with its scheme, [N, K] and bytes: codes N x K / 2, and two
    # fp32 values (scale, minimum) per group of 32
    weights = json.loads(invoke(["inspect", str(out), "--json"]).output)["weights"]
    head = weights["int4"]["lm_head.weight"]
    assert head == {"scheme": "int4-g32", "shape": [VOCAB, 64], "bytes": VOCAB * 32 + 2 * 4 * VOCAB * 2}, head
    assert len(weights["int4"]) == len(codes) and weights["int4_codes_bytes"] > 0 and weights["float_bytes"] > 0
    assert {q["scheme"] for q in weights["int4"].values()} == {"int4-g32"}
    text = invoke(["inspect", str(out)]).output
    assert "int4 weights:" in text and f"({len(codes)} int4 weights, listed below)" in text
    assert any(line.split()[:3] == ["lm_head.weight", "int4-g32", str(VOCAB)] for line in text.splitlines()), text


def test_compile_quant_fp8_writes_e4m3_weights(model_dir: Path, tmp_path: Path) -> None:
    """``--quant fp8 --quant-head``: every linear, the LM head included, stored as E4M3 bytes with
    a float32 scale per output channel, run on fp8gemm kernels; the progress says how many."""
    out = tmp_path / "f.ixa"
    result = invoke(["compile", str(model_dir), "-o", str(out), *CPU_FLAGS, "--quant", "fp8", "--quant-head"])
    assert result.exit_code == 0, result.output
    assert "quant fp8: 15 fp8 linears" in result.stderr
    art = inferx.runtime.artifact.load_artifact(out)
    codes = [n for n, w in art.manifest["weights"].items() if w["dtype"] == "f8e4m3"]
    assert codes and all(n.replace(".codes", ".scales") in art.manifest["weights"] for n in codes), codes
    assert any(k["template"] == "fp8gemm" for k in art.manifest["kernels"].values())
    assert any(k["template"] == "fp8quant" for k in art.manifest["kernels"].values())  # prompts' x once
    shown = invoke(["inspect", str(out)])
    assert shown.exit_code == 0 and "fp8gemm" in shown.output, shown.output
    tiles = tmp_path / "t.ixa"
    result = invoke(["compile", str(model_dir), "-o", str(tiles), *CPU_FLAGS, "--quant", "fp8",
                     "--no-fp8-inputs-once"])
    assert result.exit_code == 0, result.output
    kernels = inferx.runtime.artifact.load_artifact(tiles).manifest["kernels"].values()
    assert not any(k["template"] == "fp8quant" for k in kernels)


def test_kv_dtype_fp8_without_a_tokenizer_is_one_error_line(model_dir: Path, tmp_path: Path) -> None:
    """``--kv-dtype fp8`` calibrates its scales on text: a checkpoint without a tokenizer is one
    ``error:`` line naming the option, exit 1, nothing written."""
    out = tmp_path / "k.ixa"
    result = invoke(["compile", str(model_dir), "-o", str(out), *CPU_FLAGS, "--kv-dtype", "fp8"])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        "error: kv_dtype fp8 calibrates on text: the model has no tokenizer"), result.stderr
    assert not out.exists()


def test_compile_quant_overrides_give_layers_their_own_scheme(model_dir: Path, tmp_path: Path) -> None:
    """``--quant-override PATTERN=SCHEME`` (first match wins): the down projections in groups of 64,
    layer 0's o projection kept float, the rest under --quant; inspect lists each weight's scheme."""
    out = tmp_path / "o.ixa"
    rules = ["*layers.0.self_attn.o_proj*=float", "*down_proj*=int4-g64", "*o_proj*=int4-g64"]
    result = invoke(["compile", str(model_dir), "-o", str(out), *CPU_FLAGS, "--quant", "int4-g32",
                     *(a for r in rules for a in ("--quant-override", r))])
    assert result.exit_code == 0, result.output
    assert "quant int4-g32: 13 linears in int4" in result.stderr, result.stderr
    int4 = json.loads(invoke(["inspect", str(out), "--json"]).output)["weights"]["int4"]
    schemes = {n: q["scheme"] for n, q in int4.items()}
    assert schemes["model.layers.0.mlp.down_proj.weight"] == "int4-g64"
    assert schemes["model.layers.1.mlp.down_proj.weight"] == "int4-g64"
    assert schemes["model.layers.1.self_attn.o_proj.weight"] == "int4-g64"
    assert "model.layers.0.self_attn.o_proj.weight" not in schemes
    assert {s for n, s in schemes.items() if "down_proj" not in n and "o_proj" not in n} == {"int4-g32"}, schemes


def test_compile_refuses_an_unsupported_architecture(tmp_path: Path) -> None:
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text('{"model_type": "bert"}')
    result = invoke(["compile", str(tmp_path / "bert"), "-o", str(tmp_path / "x.ixa"), *CPU_FLAGS])
    assert_user_error(result, "config.json", "unsupported architecture", "bert")


def test_compile_refuses_bad_config_json(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{")
    result = invoke(["compile", str(tmp_path / "bad"), "-o", str(tmp_path / "x.ixa"), *CPU_FLAGS])
    assert_user_error(result, "config.json", "not valid JSON")


def test_compile_refuses_to_overwrite_a_non_artifact(model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    result = invoke(["compile", str(model_dir), "-o", str(tmp_path / "notes.txt"), *CPU_FLAGS])
    assert_user_error(result, "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "keep me"


# --- run ------------------------------------------------------------------------------------


def test_run_prints_the_sessions_tokens(compiled: tuple[Path, Result]) -> None:
    out, _ = compiled
    result = invoke(["run", str(out), "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--json"])
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    want = inferx.load(out).generate([[1, 2, 3]], 4)[0].tolist()
    assert row["prompt_ids"] == [1, 2, 3]
    assert row["tokens"] == want[: len(row["tokens"])] and 1 <= len(row["tokens"]) <= 4
    assert "text" not in row
    text = invoke(["run", str(out), "--prompt-ids", "1,2,3", "--max-new-tokens", "4"])
    assert text.stdout == f"tokens: {' '.join(map(str, row['tokens']))}\n"


def test_run_samples_with_a_seed(compiled: tuple[Path, Result]) -> None:
    """--temperature above 0 samples: the seed is printed when not given, and giving it draws the
    same tokens again, which are the session's for that seed; --logprobs prints the model's
    log-probability of each token."""
    from inferx.runtime.sampling import SamplingParams

    out, _ = compiled
    args = ["run", str(out), "--prompt-ids", "1,2,3", "--max-new-tokens", "4", "--temperature", "1.2",
            "--top-k", "20", "--json", "--logprobs"]
    first = invoke(args)
    assert first.exit_code == 0, first.output
    seed = int(re.search(r"seed (\d+)", first.stderr).group(1))  # type: ignore[union-attr]
    again = invoke([*args, "--seed", str(seed)])
    [a], [b] = json.loads(first.stdout), json.loads(again.stdout)
    assert a == b and "seed" not in again.stderr
    want = inferx.load(out).generate([[1, 2, 3]], 4, sampling=SamplingParams(1.2, 20, seed=seed))[0].tolist()
    assert a["tokens"] == want[: len(a["tokens"])]
    assert len(a["logprobs"]) == len(a["tokens"]) and all(v <= 0 for v in a["logprobs"])


@pytest.mark.slow
def test_run_with_the_artifacts_tokenizer(with_tokenizer: Path) -> None:
    result = invoke(["run", str(with_tokenizer), "--prompt", "w1 w5 w7", "--prompt", "w9 w3",
                     "--max-new-tokens", "3", "--json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    assert [r["prompt_ids"] for r in rows] == [[1, 5, 7], [9, 3]]
    for r in rows:
        assert r["text"] == " ".join(f"w{t}" for t in r["tokens"] if t != 2)
    by_ids = json.loads(invoke(["run", str(with_tokenizer), "--prompt-ids", "1,5,7", "--max-new-tokens", "3",
                                "--json"]).stdout)
    assert by_ids[0]["tokens"] == rows[0]["tokens"] and by_ids[0]["text"] == rows[0]["text"]


def test_tokenizer_files_are_in_the_artifact(with_tokenizer: Path) -> None:
    summary = json.loads(invoke(["inspect", str(with_tokenizer), "--json"]).stdout)
    assert summary["tokenizer"] == ["tokenizer/tokenizer.json", "tokenizer/tokenizer_config.json"]


CHAT_TEMPLATE = ("{% for m in messages %}{{ 'w3' if m['role'] == 'system' else 'w4' }} {{ m['content'] }} w5 "
                 "{% endfor %}{% if add_generation_prompt %}w6{% endif %}")


def _word_tokenizer(chat: bool) -> Any:
    """A word-level tokenizer of the tiny model's vocabulary (w0 ... w95), with a chat template
    where ``chat``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = T.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", eos_token="w2")
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    return fast


@pytest.fixture(scope="module")
def hf_dir_with_tokenizer(model_dir: Path) -> Path:
    """The tiny checkpoint directory with a tokenizer and chat template saved beside its weights,
    compiled by the CLI."""
    import shutil

    path = model_dir.parent / "tiny-llama-tok"
    shutil.copytree(model_dir, path)
    _word_tokenizer(chat=True).save_pretrained(path)
    out = model_dir.parent / "tiny-tok.ixa"
    result = invoke(["compile", str(path), "-o", str(out), *CPU_FLAGS])
    assert result.exit_code == 0, result.output
    assert "tokenizer: " in result.stderr + result.stdout
    return out


@pytest.mark.slow
def test_an_hf_directorys_tokenizer_and_chat_template_travel_with_the_artifact(hf_dir_with_tokenizer: Path) -> None:
    """Compiled from an HF directory, the artifact carries its tokenizer and chat template:
    ``--prompt`` tokenizes with it, ``--chat`` (with ``--system``) renders the template with the
    assistant's turn opened, and the ids are those of the template's text."""
    summary = json.loads(invoke(["inspect", str(hf_dir_with_tokenizer), "--json"]).stdout)
    assert "tokenizer/tokenizer.json" in summary["tokenizer"], summary["tokenizer"]
    plain = json.loads(invoke(["run", str(hf_dir_with_tokenizer), "--prompt", "w1 w7", "--max-new-tokens", "2",
                               "--json"]).stdout)
    assert plain[0]["prompt_ids"] == [1, 7]
    chat = invoke(["run", str(hf_dir_with_tokenizer), "--chat", "w9 w8", "--chat", "w1", "--system", "w7",
                   "--max-new-tokens", "2", "--json"])
    assert chat.exit_code == 0, chat.output
    rows = json.loads(chat.stdout)
    assert [r["prompt_ids"] for r in rows] == [[3, 7, 5, 4, 9, 8, 5, 6], [3, 7, 5, 4, 1, 5, 6]]
    by_ids = json.loads(invoke(["run", str(hf_dir_with_tokenizer), "--prompt-ids", "4,9,8,5,6",
                                "--max-new-tokens", "2", "--json"]).stdout)
    alone = json.loads(invoke(["run", str(hf_dir_with_tokenizer), "--chat", "w9 w8", "--max-new-tokens", "2",
                               "--json"]).stdout)
    assert alone[0]["prompt_ids"] == [4, 9, 8, 5, 6] and alone[0]["tokens"] == by_ids[0]["tokens"]


def test_a_checkpoints_broken_tokenizer_is_one_error_line(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    path = tmp_path / "broken"
    shutil.copytree(model_dir, path)
    (path / "tokenizer.json").write_text('{"model": ')
    result = invoke(["compile", str(path), "-o", str(tmp_path / "out.ixa"), *CPU_FLAGS])
    assert_user_error(result, str(path), "tokenizer cannot be read")
    assert not (tmp_path / "out.ixa").exists()


@pytest.mark.parametrize("args, names", [
    (["--chat", "w1"], ["no chat template", "--prompt"]),
    (["--prompt", "w1", "--system", "w2"], ["--system", "--chat"]),
    (["--prompt", "w1", "--chat", "w2"], ["one of the three"]),
])
def test_chat_user_errors(with_tokenizer: Path, args: list[str], names: list[str]) -> None:
    assert_user_error(invoke(["run", str(with_tokenizer), *args]), *names)


@pytest.mark.parametrize("args, names", [
    (["--prompt", "hello"], ["carries no tokenizer", "--prompt-ids"]),
    (["--prompt-ids", "1,x"], ["'x'"]),
    (["--prompt-ids", "1,200"], ["200", "vocabulary"]),
    ([], ["--prompt-ids"]),
    (["--prompt-ids", "1", "--top-p", "0"], ["--top-p", "(0.0, 1.0]"]),
    (["--prompt-ids", "1", "--temperature", "-1"], ["--temperature"]),
])
def test_run_user_errors(compiled: tuple[Path, Result], args: list[str], names: list[str]) -> None:
    out, _ = compiled
    assert_user_error(invoke(["run", str(out), *args]), *names)


def test_truncated_artifact(compiled: tuple[Path, Result], tmp_path: Path) -> None:
    out, _ = compiled
    bad = tmp_path / "truncated.ixa"
    bad.write_bytes(out.read_bytes()[:20000])
    assert_user_error(invoke(["run", str(bad), "--prompt-ids", "1,2"]), "truncated.ixa", "truncated")
    assert_user_error(invoke(["inspect", str(bad)]), "truncated.ixa", "truncated")


def test_directory_artifact_missing_a_file(model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny"
    assert invoke(["compile", str(model_dir), "-o", str(out), *CPU_FLAGS]).exit_code == 0
    victim = sorted((out / "kernels").iterdir())[0]
    victim.unlink()
    assert_user_error(invoke(["inspect", str(out)]), victim.name)
    assert_user_error(invoke(["run", str(out), "--prompt-ids", "1"]), victim.name)


# --- inspect --------------------------------------------------------------------------------


def test_inspect_json(compiled: tuple[Path, Result]) -> None:
    out, _ = compiled
    result = invoke(["inspect", str(out), "--json"])
    assert result.exit_code == 0, result.output
    s = json.loads(result.stdout)
    assert s["target"] == "cpu" and s["packed"] is True
    assert s["model"]["num_layers"] == 2 and s["limits"] == {"max_batch": 2, "max_seq_len": 32}
    for entry in ("prefill", "decode"):
        e = s["entries"][entry]
        assert e["layers"]["per_layer"] == 5, e
        assert e["layers"]["per_layer_by_template"] == {"attention": 1, "gemm": 4}
        assert e["layers"]["non_layer"] == 2
        assert e["launches"] == 2 * 5 + 2
        assert e["memory_plan"] and all(b["peak_bytes"] <= b["no_reuse_bytes"] for b in e["memory_plan"])
    assert {k["schedule_origin"] for k in s["kernels"].values()} == {"heuristic"}
    assert sorted(s["fallbacks"]["kernels"]) == sorted(s["kernels"])
    gemm = next(k for k in s["kernels"].values() if k["template"] == "gemm")
    assert {"BM", "BN", "BK", "num_warps", "num_stages"} <= set(gemm["schedule"])


def test_inspect_text(compiled: tuple[Path, Result]) -> None:
    out, _ = compiled
    result = invoke(["inspect", str(out)])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "target     cpu" in text
    assert "entry decode: 12 launches" in text
    assert "per layer: 5 launches (attention 1, gemm 4) x 2 layers; outside layers: 2 (gather 1, gemm 1)" in text
    assert "memory plan" in text and "KV cache" in text
    # the last-token logits: the LM head over the gathered last tokens (a third gather)
    assert "entry prefill_last: 13 launches" in text
    assert "outside layers: 3 (gather 2, gemm 1)" in text
    assert "fallbacks: 15 kernels on a heuristic schedule" in text


def test_layer_span_of_one_layer_and_of_no_cache() -> None:
    def step(*args: int, out: str) -> LaunchStep:
        return LaunchStep("k", tuple(Binding("arg", index=i) for i in args), (Binding("buffer", name=out),))

    args = tuple(ArgSpec(n, (), "i32") for n in ("input_ids", "positions", "kv_lens", "k0", "v0"))
    launches = (step(0, out="a"), step(1, 3, 4, out="b"), step(out="c"), step(out="logits"))
    entry = EntryPlan(args, launches, {}, (Binding("buffer", name="logits"),))
    assert _layer_span(entry, 1) == (1, 3)
    assert _layer_span(replace(entry, args=args[:3]), 1) is None


# --- the installed console scripts ----------------------------------------------------------


@pytest.mark.slow
def test_console_scripts(model_dir: Path, tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "TRITON_INTERPRET": "1", "HF_HUB_OFFLINE": "1"}

    def script(name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(bin_dir / name), *args], capture_output=True, text=True, env=env, timeout=300)

    out = tmp_path / "tiny.ixa"
    done = script("inferx-compile", str(model_dir), "-o", str(out), *CPU_FLAGS)
    assert done.returncode == 0, done.stderr
    assert "[9/9] wrote" in done.stderr and done.stdout.strip() == str(out)

    done = script("inferx", "run", str(out), "--prompt-ids", "1,2,3", "--max-new-tokens", "4")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tokens: ") and 1 <= len(done.stdout.split()) - 1 <= 4

    done = script("inferx", "inspect", str(out))
    assert done.returncode == 0, done.stderr
    assert "entry decode" in done.stdout and "per layer: 5 launches" in done.stdout

    bad = tmp_path / "truncated.ixa"
    bad.write_bytes(out.read_bytes()[:20000])
    for args in (["inferx", "run", str(bad), "--prompt-ids", "1"], ["inferx", "inspect", str(bad)],
                 ["inferx-compile", str(tmp_path / "missing"), "-o", str(tmp_path / "x.ixa")]):
        done = script(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("error: ") and Path(args[2]).name in done.stderr


def test_compile_quant_method_calibrates_on_the_text_given(model_dir: Path, tmp_path: Path) -> None:
    """``--quant-method gptq --calibration FILE``: the file's text, tokenized by the checkpoint's
    tokenizer, is what GPTQ calibrates on (windows of the model's context, 64 tokens, here)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab={f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    src = tmp_path / "with-tok"
    src.mkdir()
    for f in model_dir.iterdir():
        (src / f.name).write_bytes(f.read_bytes())
    T.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="w0", eos_token="w2").save_pretrained(src)
    text = tmp_path / "cal.txt"
    text.write_text(" ".join(f"w{(i * 7) % VOCAB}" for i in range(300)))
    out = tmp_path / "q.ixa"
    result = invoke(["compile", str(src), "-o", str(out), *CPU_FLAGS, "--quant", "int4-g32", "--quant-method", "gptq",
                     "--calibration", str(text)])
    assert result.exit_code == 0, result.output
    assert re.search(rf"calibrating gptq on [1-9] windows of 64 tokens of {re.escape(str(text))}", result.stderr)
    assert "14 linears in int4, by GPTQ (the LM head stays float)" in result.stderr
    short = tmp_path / "short.txt"
    short.write_text("w1 w2 w3")
    assert_user_error(invoke(["compile", str(src), "-o", str(tmp_path / "r.ixa"), *CPU_FLAGS, "--quant", "int4-g32",
                              "--quant-method", "awq", "--calibration", str(short)]), str(short), "3 tokens")
    assert not (tmp_path / "r.ixa").exists()
