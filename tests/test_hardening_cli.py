"""Bad CLI use: every subcommand given a path that does not exist, a directory where a file is
expected, a file where a directory is expected or a file it cannot read, and compile options out of
range, answers one ``error:`` line naming the option or path and exits 1; ``inferx opt`` on deep
nesting, a missing output folder and a huge module answers the same way instead of a traceback or
a long wait."""

from __future__ import annotations

import builtins
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import transformers as T
from click.testing import CliRunner, Result

from inferx.cli import compile_command, main

T4 = "!ix.tensor<[4], f32>"
GOOD_IR = f"func.func @f(%x: {T4}) -> {T4} {{\n  func.return %x : {T4}\n}}\n"
CPU = ["--target", "cpu", "--dtype", "fp32", "--max-seq-len", "32", "--max-batch", "2"]


def invoke(args: list[str], command: object = main) -> Result:
    return CliRunner().invoke(command, args, catch_exceptions=False)  # type: ignore[arg-type]


def assert_user_error(result: Result, *names: str) -> str:
    """Exit 1, one error line last on stderr naming each of ``names``, no traceback; the line."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert lines and (lines[-1].startswith("error: ") or ": error: " in lines[-1]), result.stderr
    assert not any("error" in line for line in lines[:-1]), result.stderr
    assert "Traceback" not in result.output
    for name in names:
        assert name in lines[-1], (name, lines[-1])
    return lines[-1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(
        vocab_size=96,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    path = tmp_path_factory.mktemp("cli") / "tiny"
    T.LlamaForCausalLM(cfg).eval().save_pretrained(path)
    return path


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """A missing path, a directory, a file, and a file whose reads fail with EACCES (root reads any
    file whatever its mode, so the failure is made at open())."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "file.txt").write_text("not what is expected\n")
    locked = tmp_path / "locked.ixa"
    locked.write_bytes(b"x" * 100)
    (tmp_path / "lockeddir").mkdir()
    (tmp_path / "lockeddir" / "config.json").write_text("{}")
    (tmp_path / "locked.mlir").write_text(GOOD_IR)
    deny = {str(locked), str(tmp_path / "lockeddir" / "config.json"), str(tmp_path / "locked.mlir")}
    real_open = io.open

    def guarded(file: object, *args: object, **kwargs: object) -> object:
        if str(file) in deny:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(io, "open", guarded)
    monkeypatch.setattr(builtins, "open", guarded)
    monkeypatch.chdir(tmp_path)
    yield {
        "missing": tmp_path / "no" / "such",
        "dir": tmp_path / "dir",
        "file": tmp_path / "file.txt",
        "locked": locked,
        "lockeddir": tmp_path / "lockeddir",
        "lockedir": tmp_path / "locked.mlir",
    }


# --- 4. paths: missing, a directory for a file, a file for a directory, unreadable ---------------

CASES = [
    # (args with {missing} {dir} {file} {locked} {lockeddir} {lockedir} {model}, what the line names)
    (["compile", "{missing}", "-o", "x.ixa"], ["no/such", "no such file"]),
    (["compile", "{file}", "-o", "x.ixa"], ["file.txt", "HF model directory or a .gguf"]),
    (["compile", "{dir}", "-o", "x.ixa"], ["config.json"]),
    (["compile", "{lockeddir}", "-o", "x.ixa"], ["config.json", "Permission denied"]),
    (["compile", "{model}", "-o", "{file}", *CPU], ["file.txt", "refusing to overwrite"]),
    (["compile", "{model}", "-o", "x.ixa", "--dump-ir", "{file}", *CPU], ["--dump-ir", "file.txt", "not a directory"]),
    (["run", "{missing}", "--prompt-ids", "1"], ["no/such", "no such artifact"]),
    (["run", "{dir}", "--prompt-ids", "1"], ["dir", "manifest.json is missing"]),
    (["run", "{file}", "--prompt-ids", "1"], ["file.txt", "truncated"]),
    (["run", "{locked}", "--prompt-ids", "1"], ["locked.ixa", "Permission denied"]),
    (["inspect", "{missing}"], ["no/such", "no such artifact"]),
    (["inspect", "{dir}"], ["dir", "manifest.json is missing"]),
    (["inspect", "{file}"], ["file.txt", "truncated"]),
    (["inspect", "{locked}"], ["locked.ixa", "Permission denied"]),
    (["opt", "{missing}"], ["no/such", "No such file"]),
    (["opt", "{dir}"], ["dir", "Is a directory"]),
    (["opt", "{lockedir}"], ["locked.mlir", "Permission denied"]),
    (["opt", "{model}/model.safetensors"], ["model.safetensors", "not UTF-8"]),
    (["opt", "{lockedir}", "-o", "{missing}"], ["-o", "no/such", "no directory"]),
    (["opt", "{lockedir}", "-o", "{dir}"], ["-o", "is a directory"]),
    (["tune", "{missing}", "--runner", "replay", "--replay", "{file}", "--out", "{dir}"], ["no/such"]),
    (["tune", "{dir}", "--runner", "replay", "--replay", "{file}", "--out", "{dir}"], ["config.json"]),
    (["tune", "{model}", "--runner", "replay", "--replay", "{missing}", "--out", "{dir}"], ["--replay", "no/such"]),
    (["tune", "{model}", "--runner", "replay", "--replay", "{file}", "--out", "{file}"], ["--out", "file.txt"]),
    (["bench", "--out", "{dir}"], ["--out", "is a directory"]),
    (["bench", "--out", "{missing}"], ["--out", "no directory"]),
    (["bench", "--workdir", "{file}"], ["--workdir", "file.txt", "not a directory"]),
]


@pytest.mark.parametrize("args, names", CASES, ids=[" ".join(a[:3]) for a, _ in CASES])
def test_bad_paths_give_one_error_line(
    places: dict[str, Path], model_dir: Path, args: list[str], names: list[str]
) -> None:
    filled = [a.format(model=model_dir, **places) for a in args]
    assert_user_error(invoke(filled), *names)
    assert not Path("x.ixa").exists()
    assert places["file"].read_text() == "not what is expected\n"


def test_inferx_compile_entry_point_answers_the_same(places: dict[str, Path]) -> None:
    assert_user_error(invoke([str(places["missing"]), "-o", "x.ixa"], compile_command), "no/such")
    assert_user_error(invoke([str(places["file"]), "-o", "x.ixa"], compile_command), "file.txt")


# --- 3. compile options ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, names",
    [
        (["--max-batch", "-1"], ["--max-batch", "-1"]),
        (["--max-batch", "0"], ["--max-batch", "0"]),
        (["--max-seq-len", "0"], ["--max-seq-len", "0"]),
        (["--max-seq-len", "-3"], ["--max-seq-len", "-3"]),
        (["--jobs", "0"], ["--jobs", "0"]),
        (["--jobs", "-2"], ["--jobs", "-2"]),
        (["--target", "h300"], ["'h300'", "h200, h100, sm_90, cpu"]),
        (["--dtype", "int4"], ["'int4'", "fp32, fp16, bf16"]),
    ],
)
def test_bad_compile_options_give_one_error_line_before_any_work(
    model_dir: Path, tmp_path: Path, args: list[str], names: list[str]
) -> None:
    result = invoke(["compile", str(model_dir), "-o", str(tmp_path / "x.ixa"), *args])
    assert_user_error(result, *names)
    assert "[1/9]" not in result.stderr
    assert list(tmp_path.iterdir()) == []


# --- inferx opt: deep nesting, huge modules ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        f"func.func @f(%x: !ix.tensor<[{'(' * 5000}a{')' * 5000}], f32>) {{\n  func.return\n}}\n",
        f"func.func @f(%x: {T4}) attributes {{foo = {'[' * 5000}{']' * 5000}}} {{\n  func.return\n}}\n",
        f"func.func @f(%x: {T4}) {{\n" + '  "func.call"() ({\n' * 400 + "}) : () -> ()\n" * 400 + "  func.return\n}\n",
    ],
    ids=["parens-in-a-dim", "nested-arrays", "nested-regions"],
)
def test_opt_on_deep_nesting(tmp_path: Path, text: str) -> None:
    """An IR diagnostic: ``FILE:LINE:COL: error: ...`` then the source line and a caret."""
    (tmp_path / "deep.mlir").write_text(text)
    result = invoke(["opt", str(tmp_path / "deep.mlir")])
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, result.stderr[:2000]
    assert "deep.mlir:" in errors[0] and "nested more than 64 deep" in errors[0], errors[0][:300]
    assert result.stderr.rstrip().endswith("^"), result.stderr[-300:]


def test_opt_on_a_huge_module_refuses_at_once(tmp_path: Path) -> None:
    lines = [f"func.func @f(%x: {T4}) -> {T4} {{"]
    lines += [f"  %v{i} = ix.add %x, %x : ({T4}, {T4}) -> {T4}" for i in range(40_000)]
    lines += [f"  func.return %x : {T4}", "}"]
    (tmp_path / "big.mlir").write_text("\n".join(lines) + "\n")
    assert_user_error(invoke(["opt", str(tmp_path / "big.mlir")]), "big.mlir", "40002 ops", "--max-ops 30000")


def test_opt_counts_ops_and_writes_its_output_whole(tmp_path: Path) -> None:
    (tmp_path / "f.mlir").write_text(GOOD_IR)
    assert_user_error(invoke(["opt", str(tmp_path / "f.mlir"), "--max-ops", "1"]), "2 ops")
    result = invoke(["opt", str(tmp_path / "f.mlir"), "-o", str(tmp_path / "out.mlir")])
    assert result.exit_code == 0, result.output
    assert "func.return %x" in (tmp_path / "out.mlir").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.mlir", "out.mlir"]


def test_a_cuda_failure_at_load_is_one_error_line(model_dir: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A device that cannot hold the model (CudaError from the driver) is the user's to fix: one
    line naming the call, no traceback."""
    import inferx.runtime.loaded as loaded
    from inferx.runtime.cuda_driver import CudaError

    art = tmp_path / "a.ixa"
    assert invoke(["compile", str(model_dir), "-o", str(art), *CPU]).exit_code == 0

    def fail(*args: object, **kwargs: object) -> object:
        raise CudaError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(loaded, "load", fail)
    result = invoke(["run", str(art), "--prompt-ids", "1,2", "--device", "cuda"])
    assert_user_error(result, "cuMemAlloc", "OUT_OF_MEMORY")
