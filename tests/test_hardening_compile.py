"""Compiling what users hand over, at its edges: a sharded checkpoint's index that names files
outside the model directory, config files that are not JSON objects, the default ``max_seq_len``
of a model with a short context, float32 checkpoints for GPU targets, and compiling from a script
read on stdin (kernel build workers must never run the caller's ``__main__``).

Every refusal is one error naming the file, field or value at fault: a ``ValueError`` subclass from
the Python API, one ``error:`` line and exit 1 from the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import transformers as T
from click.testing import CliRunner, Result

import inferx
from inferx.cli import main
from inferx.compiler.build import build_cubins
from inferx.compiler.frontend.weights import SafetensorsStore
from inferx.compiler.options import CompileError
from inferx.runtime.kernel_source import KernelSource, Param

INDEX = "model.safetensors.index.json"


def _llama(max_position: int = 64, seed: int = 0) -> T.LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=max_position)
    return T.LlamaForCausalLM(cfg).eval()


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def assert_user_error(result: Result, *names: str) -> str:
    """Exit 1, one ``error:`` line on stderr naming each of ``names``, no traceback; the line."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.stderr
    assert all(not line.startswith("error") for line in lines[:-1]), result.stderr
    assert "Traceback" not in result.output
    for name in names:
        assert name in lines[-1], (name, lines[-1])
    return lines[-1]


# --- 1. shard names stay inside the model directory; config files are JSON objects ------------


@pytest.fixture(scope="module")
def sharded_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sharded") / "model"
    _llama().save_pretrained(path, max_shard_size="40KB")
    assert (path / INDEX).is_file() and len(list(path.glob("*.safetensors"))) > 1
    return path


@pytest.fixture
def sharded(sharded_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of a good sharded checkpoint to break; reading any weight fails the test."""

    def no_reads(self: SafetensorsStore, key: str) -> object:
        raise AssertionError(f"weight '{key}' was read before the checkpoint was validated")

    monkeypatch.setattr(SafetensorsStore, "__getitem__", no_reads)
    return Path(shutil.copytree(sharded_dir, tmp_path / "ckpt"))


def _remap(path: Path, shard: object) -> str:
    """Points the index's first tensor at ``shard``; the tensor's name."""
    index = json.loads((path / INDEX).read_text())
    tensor = sorted(index["weight_map"])[0]
    index["weight_map"][tensor] = shard
    (path / INDEX).write_text(json.dumps(index))
    return tensor


def _import_error(path: Path) -> str:
    with pytest.raises(ValueError) as info:
        inferx.import_model(path)
    return str(info.value)


def _outside_shard(sharded: Path) -> Path:
    """A real safetensors file (a copy of one shard) outside the model directory."""
    outside = sharded.parent / "elsewhere"
    outside.mkdir()
    return Path(shutil.copy(sorted(sharded.glob("*.safetensors"))[0], outside / "secret.safetensors"))


def test_index_naming_an_absolute_path_is_refused(sharded: Path) -> None:
    target = _outside_shard(sharded)
    tensor = _remap(sharded, str(target))
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg and str(target) in msg


def test_index_naming_a_parent_component_is_refused(sharded: Path) -> None:
    _outside_shard(sharded)
    tensor = _remap(sharded, "../elsewhere/secret.safetensors")
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg and "../elsewhere/secret.safetensors" in msg


def test_index_naming_a_symlink_out_of_the_directory_is_refused(sharded: Path) -> None:
    target = _outside_shard(sharded)
    (sharded / "link.safetensors").symlink_to(target)
    tensor = _remap(sharded, "link.safetensors")
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg and "link.safetensors" in msg
    assert "outside the model directory" in msg


def test_index_naming_a_missing_file_is_refused(sharded: Path) -> None:
    tensor = _remap(sharded, "model-99999-of-99999.safetensors")
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg and "model-99999-of-99999.safetensors" in msg
    assert "missing" in msg


def test_index_naming_a_directory_is_refused(sharded: Path) -> None:
    (sharded / "sub").mkdir()
    tensor = _remap(sharded, "sub")
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg and "'sub'" in msg


def test_index_naming_a_non_string_is_refused(sharded: Path) -> None:
    tensor = _remap(sharded, ["a", "b"])
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg


@pytest.mark.parametrize("shard", ["\x00", "model-00001-of-00002.safetensors\x00"], ids=["nul", "trailing-nul"])
def test_index_naming_a_file_with_a_nul_byte_is_refused(sharded: Path, shard: str) -> None:
    tensor = _remap(sharded, shard)
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"'{tensor}'" in msg and "not a file name" in msg


def test_index_naming_a_shard_that_does_not_hold_the_tensor_is_refused(sharded: Path) -> None:
    """The tensor is in another shard: the index is wrong, and the weight is not taken from a file
    it does not name for it."""
    index = json.loads((sharded / INDEX).read_text())
    weight_map = index["weight_map"]
    shards = sorted(set(weight_map.values()))
    # a tensor whose shard holds another one (so that the shard is still read) moved to another shard
    tensor = next(t for t in sorted(weight_map) if list(weight_map.values()).count(weight_map[t]) > 1)
    held_in, other = weight_map[tensor], next(s for s in shards if s != weight_map[tensor])
    weight_map[tensor] = other
    (sharded / INDEX).write_text(json.dumps(index))
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and f"tensor '{tensor}' names shard '{other}', which does not hold it" in msg
    assert f"(it is in '{held_in}')" in msg


def test_symlinks_inside_the_directory_and_to_the_hub_cache_blobs_import(sharded_dir: Path, tmp_path: Path) -> None:
    """The HuggingFace hub cache keeps a snapshot's files as symlinks into the repository's blobs."""
    repo = tmp_path / "models--org--tiny"
    snapshot = repo / "snapshots" / "0123abc"
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for f in sharded_dir.iterdir():
        blob = repo / "blobs" / f"blob-{f.name}"
        shutil.copy(f, blob)
        (snapshot / f.name).symlink_to(Path("../..") / "blobs" / blob.name)
    assert inferx.import_model(snapshot).info.num_layers == 1


@pytest.mark.parametrize("text, kind", [("[1, 2]", "a list"), ('"llama"', "a string"), ("null", "null")])
def test_config_that_is_not_an_object(sharded: Path, text: str, kind: str) -> None:
    (sharded / "config.json").write_text(text)
    msg = _import_error(sharded)
    assert str(sharded / "config.json") in msg and "JSON object" in msg and kind in msg


@pytest.mark.parametrize("text, kind", [("[1, 2]", "a list"), ('"weights"', "a string")])
def test_index_that_is_not_an_object(sharded: Path, text: str, kind: str) -> None:
    (sharded / INDEX).write_text(text)
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and "JSON object" in msg and kind in msg


def test_index_whose_weight_map_is_not_an_object(sharded: Path) -> None:
    (sharded / INDEX).write_text('{"weight_map": ["model-00001-of-00002.safetensors"]}')
    msg = _import_error(sharded)
    assert str(sharded / INDEX) in msg and "weight_map" in msg


@pytest.mark.parametrize("name", ["config.json", INDEX])
def test_file_that_is_not_utf8(sharded: Path, name: str) -> None:
    (sharded / name).write_bytes(b'{"model_type": "llama\xff\xfe"}')
    msg = _import_error(sharded)
    assert str(sharded / name) in msg and "UTF-8" in msg


def test_safetensors_header_that_is_not_an_object(sharded: Path) -> None:
    file = sorted(sharded.glob("*.safetensors"))[0]
    header = b"[1, 2, 3]"
    file.write_bytes(len(header).to_bytes(8, "little") + header)
    msg = _import_error(sharded)
    assert str(file) in msg and "header" in msg


@pytest.mark.parametrize("edit, names", [
    (lambda p: _remap(p, "/etc/hostname"), [INDEX, "/etc/hostname"]),
    (lambda p: _remap(p, "../x.safetensors"), [INDEX, "../x.safetensors"]),
    (lambda p: (p / "config.json").write_text("[]"), ["config.json", "JSON object"]),
    (lambda p: (p / "config.json").write_bytes(b"\xff\xfe{}"), ["config.json", "UTF-8"]),
    (lambda p: (p / INDEX).write_text('"x"'), [INDEX, "JSON object"]),
], ids=["absolute", "parent", "config-list", "config-not-utf8", "index-string"])
def test_cli_names_the_file_at_fault(sharded: Path, tmp_path: Path, edit: object, names: list[str]) -> None:
    edit(sharded)  # type: ignore[operator]
    out = tmp_path / "x.ixa"
    result = invoke(["compile", str(sharded), "-o", str(out), "--target", "cpu", "--dtype", "fp32"])
    assert_user_error(result, *names)
    assert not out.exists()


# --- 2. max_seq_len: by default the smaller of 2048 and the model's context -------------------


class _Stop(Exception):
    pass


def _progress_until(stop_at: str, lines: list[str]) -> object:
    def say(line: str) -> None:
        lines.append(line)
        if line.startswith(stop_at):
            raise _Stop

    return say


@pytest.mark.parametrize("context, want, why", [(64, 64, "the model's context"), (4096, 2048, "the default")])
def test_default_max_seq_len_is_2048_or_the_models_context(tmp_path: Path, context: int, want: int, why: str) -> None:
    lines: list[str] = []
    with pytest.raises(_Stop):
        inferx.compile(_llama(max_position=context), target="cpu", output=tmp_path / "a", dtype="fp32",
                       max_batch=2, progress=_progress_until("[2/9]", lines))
    assert f"        max_seq_len {want} ({why})" in lines, lines
    assert not (tmp_path / "a").exists()


def test_short_context_model_compiles_with_the_default(tmp_path: Path) -> None:
    from inferx.runtime.artifact import load_artifact

    art = inferx.compile(_llama(max_position=48), target="cpu", output=tmp_path / "a", dtype="fp32", max_batch=1)
    assert load_artifact(art).sections()["limits"]["max_seq_len"] == 48


def test_explicit_max_seq_len_over_the_context_is_refused(tmp_path: Path) -> None:
    from inferx.compiler.options import CompileError

    with pytest.raises(CompileError, match="max_seq_len 65 exceeds the model's 64"):
        inferx.compile(_llama(max_position=64), target="cpu", output=tmp_path / "a", dtype="fp32", max_seq_len=65)
    assert not (tmp_path / "a").exists()


def test_cli_default_max_seq_len(tmp_path: Path) -> None:
    model = tmp_path / "model"
    _llama(max_position=40).save_pretrained(model)
    out = tmp_path / "x.ixa"
    result = invoke(["compile", str(model), "-o", str(out), "--target", "cpu", "--dtype", "fp32", "--max-batch", "1"])
    assert result.exit_code == 0, result.output
    assert "        max_seq_len 40 (the model's context)" in result.stderr.splitlines()
    shown = invoke(["inspect", str(out), "--json"])
    assert json.loads(shown.stdout)["limits"]["max_seq_len"] == 40
    result = invoke(["compile", str(model), "-o", str(tmp_path / "y.ixa"), "--target", "cpu", "--dtype", "fp32",
                     "--max-seq-len", "41"])
    assert_user_error(result, "max_seq_len 41", "40")
    assert not (tmp_path / "y.ixa").exists()


def test_cli_help_says_the_max_seq_len_default() -> None:
    result = invoke(["compile", "--help"])
    assert "2048" in result.output and "model's context" in result.output


# --- 3. float32 checkpoints for GPU targets ---------------------------------------------------


@pytest.fixture(scope="module")
def fp32_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fp32") / "model"
    _llama().save_pretrained(path)
    assert json.loads((path / "config.json").read_text())["dtype"] == "float32"
    return path


def test_float32_checkpoint_compiles_in_bf16_for_the_gpu(fp32_dir: Path, tmp_path: Path) -> None:
    from inferx.runtime.artifact import load_artifact

    lines: list[str] = []
    art = inferx.compile(fp32_dir, target="h200", output=tmp_path / "a", max_batch=2, progress=lines.append)
    assert "        dtype bf16 (the checkpoint is float32; --dtype to choose)" in lines, lines
    sections = load_artifact(art).sections()
    assert sections["model"]["dtype"] == "bf16"
    assert all(k["cubin"] for k in sections["kernels"].values())


@pytest.mark.parametrize("target, dtype, model_dtype", [("cpu", None, torch.float32), ("h200", None, torch.float16),
                                                        ("h200", "fp16", torch.float32)])
def test_other_dtypes_are_kept(tmp_path: Path, target: str, dtype: str | None, model_dtype: torch.dtype) -> None:
    path = tmp_path / "model"
    _llama().to(model_dtype).save_pretrained(path)
    lines: list[str] = []
    options = {"dtype": dtype} if dtype else {}
    with pytest.raises(_Stop):
        inferx.compile(path, target=target, output=tmp_path / "a", max_batch=2,
                       progress=_progress_until("[2/9]", lines), **options)
    assert not any("dtype" in line for line in lines), lines


@pytest.mark.parametrize("dtype", ["fp32", "f32"])
def test_fp32_for_a_gpu_target_is_refused(fp32_dir: Path, tmp_path: Path, dtype: str) -> None:
    from inferx.compiler.options import CompileError

    lines: list[str] = []
    with pytest.raises(CompileError, match=rf"dtype {dtype} does not run on target h200: .*bf16 and fp16"):
        inferx.compile(fp32_dir, target="h200", output=tmp_path / "a", dtype=dtype, progress=lines.append)
    assert lines == []  # refused before the import starts
    assert not (tmp_path / "a").exists()


def test_float32_program_for_a_gpu_target_is_refused(fp32_dir: Path, tmp_path: Path) -> None:
    from inferx.compiler.options import CompileError

    program = inferx.import_model(fp32_dir)
    with pytest.raises(CompileError, match="float32.*target h200.*bf16 and fp16"):
        inferx.compile(program, target="h200", output=tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_cli_refuses_fp32_for_a_gpu_target(fp32_dir: Path, tmp_path: Path) -> None:
    result = invoke(["compile", str(fp32_dir), "-o", str(tmp_path / "x.ixa"), "--target", "h100", "--dtype", "fp32"])
    line = assert_user_error(result, "fp32", "h100", "bf16", "fp16")
    assert "[1/9]" not in result.stderr, line
    assert not (tmp_path / "x.ixa").exists()


# --- 4. kernel build workers never run the caller's __main__ ----------------------------------

COPY = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def {name}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + i, {value}, mask=i < n)
''')


def _kernel(name: str, value: str = "tl.load(x_ptr + i, mask=i < n)", prologue: str = "") -> KernelSource:
    return KernelSource(
        name=name, template="copy", source=prologue + COPY.format(name=name, value=value),
        params=(Param("x_ptr", "in", 0, dtype="f32"), Param("y_ptr", "out", 0, dtype="f32"),
                Param("n", "sym", symbol="n")),
        grid=("cdiv(S_n, 64)",), constexprs={"BLOCK": 64})


def _run_python(args: list[str], cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300)


def test_compile_from_a_script_on_stdin(fp32_dir: Path, tmp_path: Path) -> None:
    """``python -`` has no __main__ file for a spawned process to import: the build must not need one."""
    out = tmp_path / "a.ixa"
    script = (f"import inferx\n"
              f"print(inferx.compile({str(fp32_dir)!r}, target='h200', output={str(out)!r}, max_batch=2))\n")
    result = _run_python(["-"], tmp_path, stdin=script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(out) and out.is_file()


@pytest.mark.slow  # a few seconds: CI runs it, the fast tier does not
def test_compile_from_a_script_without_a_main_guard(fp32_dir: Path, tmp_path: Path) -> None:
    """The script's top level runs once: workers import InferX's own entry point, not the script."""
    runs = tmp_path / "runs.txt"
    script = tmp_path / "build.py"
    script.write_text(textwrap.dedent(f'''\
        import inferx
        with open({str(runs)!r}, "a") as f:
            f.write("ran\\n")
        inferx.compile({str(fp32_dir)!r}, target="h200", output={str(tmp_path / "a")!r}, max_batch=2, jobs=2)
    '''))
    result = _run_python([str(script)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert runs.read_text() == "ran\n"


def test_build_names_the_kernel_that_does_not_compile() -> None:
    lines: list[str] = []
    kernels = {"k_good": _kernel("k_good"), "k_bad": _kernel("k_bad", value="no_such_name")}
    with pytest.raises(CompileError, match=r"(?s)kernel k_bad failed to compile for sm_90: .*no_such_name"):
        build_cubins(kernels, "sm_90", 2, lines.append)


def test_build_names_the_kernel_whose_worker_died() -> None:
    kernels = {"k_dead": _kernel("k_dead", prologue="import os\nos._exit(3)\n")}
    with pytest.raises(CompileError, match=r"a kernel build worker died while building k_dead for sm_90: exit code 3"):
        build_cubins(kernels, "sm_90", 1, lambda line: None)


def test_build_runs_jobs_workers_and_reports_each_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    from inferx.compiler import build

    started: list[object] = []
    real_init = build._Worker.__init__

    def counting_init(self: object) -> None:
        started.append(self)
        real_init(self)  # type: ignore[arg-type]

    monkeypatch.setattr(build._Worker, "__init__", counting_init)
    lines: list[str] = []
    names = ["k_a", "k_b", "k_c"]
    built = build_cubins({n: _kernel(n) for n in names}, "sm_90", 2, lines.append)
    assert len(started) == 2
    assert sorted(built) == names and all(b["cubin"][:4] == b"\x7fELF" for b in built.values())
    assert lines == [f"        built {i}/3: {n}" for i, n in enumerate(names, 1)]


def test_the_tuners_build_still_compiles_in_its_own_worker(tmp_path: Path) -> None:
    """The tuner's runner builds each candidate with ``compile_one`` in a worker of its own; without
    a GPU its JIT warm-up fails quietly and the build answers "" (built)."""
    ks = json.dumps(_kernel("k_tuned").to_json())
    code = ("import sys; from inferx.autotune.runner import _build_one; "
            "print(repr(_build_one(sys.stdin.read(), 90, {'n': 64}, 232448)))")
    result = _run_python(["-c", code], tmp_path, stdin=ks)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "''"


def test_an_unknown_compile_option_is_named(tmp_path: Path) -> None:
    """A misspelt keyword is a CompileError naming it and the options there are, not a TypeError
    from inside the options dataclass; nothing is written."""
    with pytest.raises(CompileError, match=r"unknown option 'max_batchs'; the options are .*max_batch"):
        inferx.compile(tmp_path / "model", output=tmp_path / "a", max_batchs=2)
    assert not (tmp_path / "a").exists()
