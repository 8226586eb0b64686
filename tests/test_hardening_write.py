"""Writing artifacts where users keep other things, and being interrupted while writing: only an
empty path or an earlier artifact (recognised by its parsed, intact manifest and the files it lists)
is ever replaced; SIGINT, SIGTERM and SIGHUP during a compile leave no temporary beside the output
and the old artifact intact; a kill at any point leaves the old artifact intact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
import transformers as T

import inferx
from inferx.compiler.options import CompileError, CompileOptions
from inferx.runtime.artifact import PACKED_MAGIC, ArtifactError, _with_self_hash, canonical_json, load_artifact
from inferx.runtime.artifact_write import check_output, write_artifact
from inferx.signals import Terminated, held, terminating

SECTIONS = {"compiler_version": "0.1.0", "triton_version": "3.6.0", "target": "cpu"}
FILES = {"kernels/k0.py": b"def k0():\n    pass\n", "weights/w.bin": bytes(range(64))}
CPU = {"target": "cpu", "dtype": "fp32", "max_seq_len": 32, "max_batch": 2}


def _tree(root: Path) -> dict[str, bytes]:
    if root.is_file():
        return {".": root.read_bytes()}
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else b"/" for p in sorted(root.rglob("*"))}


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
    path = tmp_path_factory.mktemp("write") / "tiny"
    T.LlamaForCausalLM(cfg).eval().save_pretrained(path)
    return path


# --- 1. only an empty path or an earlier artifact is replaced ---------------------------------


def _user_dir(tmp_path: Path) -> Path:
    d = tmp_path / "home"
    d.mkdir()
    (d / "notes.txt").write_text("keep me")
    return d


def _fake_manifest_dir(tmp_path: Path) -> Path:
    """A directory that merely has a manifest.json carrying the magic, beside a user's file."""
    d = tmp_path / "fake"
    d.mkdir()
    (d / "manifest.json").write_text('{"magic": "inferx-artifact", "format_version": 3}\n')
    (d / "mine.txt").write_text("keep me")
    return d


def _artifact_plus_user_file(tmp_path: Path) -> Path:
    """A real artifact directory into which a user put a file of their own."""
    d = write_artifact(tmp_path / "art", SECTIONS, FILES)
    (d / "kernels" / "notes.txt").write_text("keep me")
    return d


def _packed_lookalike(tmp_path: Path) -> Path:
    """A file that starts with the packed magic and is not a packed artifact."""
    p = tmp_path / "data.ixa"
    p.write_bytes(PACKED_MAGIC + b"a user's data, not an artifact" * 10)
    return p


def _plain_file(tmp_path: Path) -> Path:
    p = tmp_path / "notes.ixa"
    p.write_text("keep me")
    return p


def _symlink_to_artifact(tmp_path: Path) -> Path:
    target = write_artifact(tmp_path / "real", SECTIONS, FILES)
    link = tmp_path / "link"
    link.symlink_to(target)
    return link


@pytest.mark.parametrize(
    "make, why",
    [
        (_user_dir, "holds 'notes.txt' and no manifest.json"),
        (_fake_manifest_dir, "edited or is corrupted"),
        (_artifact_plus_user_file, "holds 'kernels/notes.txt'"),
        (_packed_lookalike, "does not match"),
        (_plain_file, "does not start as a packed artifact"),
        (_symlink_to_artifact, "symbolic link"),
    ],
)
def test_what_is_not_an_artifact_is_never_replaced(tmp_path: Path, make: object, why: str) -> None:
    out = make(tmp_path)  # type: ignore[operator]
    before = _tree(out)
    listing = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ArtifactError, match="refusing to overwrite") as info:
        write_artifact(out, SECTIONS, {"only.bin": b"x"})
    assert str(out) in str(info.value) and why in str(info.value)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no temporary left


@pytest.mark.parametrize("name", ["art", "art.ixa"])
def test_an_earlier_artifact_is_replaced_even_if_damaged_or_of_an_older_format(tmp_path: Path, name: str) -> None:
    out = write_artifact(tmp_path / name, SECTIONS, FILES)
    write_artifact(out, SECTIONS, {"only.bin": b"x"})
    assert sorted(load_artifact(out).files) == ["only.bin"]
    # a flipped bit inside a file: still an artifact (recognised by its manifest) to replace
    out = write_artifact(out, SECTIONS, FILES)
    victim = out / "weights" / "w.bin" if out.is_dir() else out
    data = bytearray(victim.read_bytes())
    data[-1] ^= 1
    victim.write_bytes(bytes(data))
    write_artifact(out, SECTIONS, FILES)
    load_artifact(out)


def test_a_directory_artifact_of_an_older_format_version_is_replaced(tmp_path: Path) -> None:
    out = write_artifact(tmp_path / "art", SECTIONS, FILES)
    manifest = json.loads((out / "manifest.json").read_bytes())
    (out / "manifest.json").write_bytes(canonical_json(_with_self_hash({**manifest, "format_version": 2})))
    write_artifact(out, SECTIONS, {"only.bin": b"x"})
    assert sorted(load_artifact(out).files) == ["only.bin"]


def test_empty_paths_are_replaced(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty.ixa").touch()
    for name in ("empty", "empty.ixa"):
        load_artifact(write_artifact(tmp_path / name, SECTIONS, FILES))


def test_compile_refuses_before_any_work(model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from inferx.compiler import pipeline

    def no_import(*args: object) -> None:
        raise AssertionError("the model was imported before the output was checked")

    monkeypatch.setattr(pipeline, "import_program", no_import)
    out = _fake_manifest_dir(tmp_path)
    before = _tree(out)
    with pytest.raises(ArtifactError, match="refusing to overwrite"):
        inferx.compile(model_dir, output=out, **CPU)
    assert _tree(out) == before


def test_compile_overwrites_its_own_artifact(model_dir: Path, tmp_path: Path) -> None:
    out = inferx.compile(model_dir, output=tmp_path / "art", **CPU)
    first = _tree(out)
    inferx.compile(model_dir, output=out, **CPU)
    assert _tree(out) == first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_missing_parents_are_removed_when_the_write_fails(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="missing.bin"):
        write_artifact(tmp_path / "a" / "b" / "out.ixa", SECTIONS, {"x.bin": tmp_path / "missing.bin"})
    assert list(tmp_path.iterdir()) == []
    assert write_artifact(tmp_path / "a" / "b" / "out.ixa", SECTIONS, FILES).is_file()


def test_check_output_names_the_path_and_why(tmp_path: Path) -> None:
    check_output(tmp_path / "absent")
    for bad in (Path("/"), Path("..")):
        with pytest.raises(ArtifactError, match="not a usable artifact name"):
            check_output(bad)
    with pytest.raises(ArtifactError, match="is not a directory"):
        check_output(_plain_file(tmp_path).rename(tmp_path / "plain"))


# --- 2. interrupted work leaves no temporary and the old artifact intact ----------------------

# The child compiles with its first file copy held open (test code in the child, not product code),
# so that the temporary exists when the signal comes.
CHILD = textwrap.dedent("""
    import signal, sys, time
    import inferx.runtime.artifact_write as aw

    # the product's behaviour under the default dispositions, whatever the test runner inherited
    # (a runner started with nohup or in the background ignores SIGHUP or SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    from inferx.cli import main

    real = aw._copy
    def slow(name, src, size, out):
        time.sleep(60)
        return real(name, src, size, out)
    aw._copy = slow
    main([sys.argv[1], *sys.argv[2:]])
""")


def _compile_and_signal(model_dir: Path, out: Path, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    args = [
        "compile",
        str(model_dir),
        "-o",
        str(out),
        "--target",
        "cpu",
        "--dtype",
        "fp32",
        "--max-seq-len",
        "32",
        "--max-batch",
        "2",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRITON_INTERPRET": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 120
        while not any(p.name.endswith(".tmp") for p in out.parent.iterdir()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the temporary never appeared"
            time.sleep(0.05)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize(
    "name, sig",
    [("art", signal.SIGTERM), ("art.ixa", signal.SIGTERM), ("art.ixa", signal.SIGINT), ("art", signal.SIGHUP)],
)
def test_signal_mid_write_leaves_no_temporary_and_the_old_artifact(
    model_dir: Path, tmp_path: Path, name: str, sig: signal.Signals
) -> None:
    out = inferx.compile(model_dir, output=tmp_path / name, **CPU)
    before = _tree(out)
    done = _compile_and_signal(model_dir, out, sig)
    if sig == signal.SIGINT:
        assert done.returncode == 1 and "Aborted" in done.stderr, done  # click's answer to Ctrl-C
    else:
        assert done.returncode == -sig, done  # ended by the signal, as without the handler
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    assert _tree(out) == before
    load_artifact(out)


@pytest.mark.slow
def test_kill_mid_write_leaves_the_old_artifact(model_dir: Path, tmp_path: Path) -> None:
    out = inferx.compile(model_dir, output=tmp_path / "art.ixa", **CPU)
    before = _tree(out)
    done = _compile_and_signal(model_dir, out, signal.SIGKILL)
    assert done.returncode == -signal.SIGKILL
    assert _tree(out) == before  # a kill leaves its temporary, never a partial artifact
    load_artifact(out)


def test_sigterm_without_a_handler_of_its_own_ends_the_process(tmp_path: Path) -> None:
    """Outside the CLI: a script that writes an artifact and gets SIGTERM ends by SIGTERM, its
    temporary removed."""
    script = textwrap.dedent(f"""
        import os, signal, time
        import inferx.runtime.artifact_write as aw
        real = aw._copy
        def slow(name, src, size, out):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)
        aw._copy = slow
        aw.write_artifact({str(tmp_path / "out.ixa")!r}, {SECTIONS!r}, {{"a.bin": b"x"}})
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGTERM, done
    assert list(tmp_path.iterdir()) == []


def test_a_held_signal_waits_then_is_delivered_again() -> None:
    got: list[int] = []
    old = signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
    reached = False
    try:
        with pytest.raises(Terminated, match="SIGTERM"), terminating():
            with held():
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # the handler runs between bytecodes: give it the chance
                    pass
                reached = True
            raise AssertionError("the held signal was not raised when the block ended")
    finally:
        signal.signal(signal.SIGTERM, old)
    assert reached and got == [signal.SIGTERM]  # the program's own handler saw it after the cleanup


def test_terminating_leaves_ignored_signals_and_other_threads_alone() -> None:
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with terminating():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None)
    finally:
        signal.signal(signal.SIGHUP, old)
    seen: list[object] = []

    def in_thread() -> None:
        with terminating():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGTERM)]


# --- 3. compile options: one check, one error naming the option and its value ------------------


@pytest.mark.parametrize(
    "options, names",
    [
        ({"max_batch": -1}, ["max_batch", "-1"]),
        ({"max_batch": 0}, ["max_batch", "0"]),
        ({"max_batch": 1 << 40}, ["max_batch", str(1 << 40)]),
        ({"max_batch": 2.5}, ["max_batch", "2.5"]),
        ({"max_batch": True}, ["max_batch", "True"]),
        ({"max_seq_len": 0}, ["max_seq_len", "0"]),
        ({"max_seq_len": -5}, ["max_seq_len", "-5"]),
        ({"max_seq_len": "2048"}, ["max_seq_len", "'2048'"]),
        ({"jobs": 0}, ["jobs", "0"]),
        ({"target": "h300"}, ["'h300'", "h200, h100, sm_90, cpu"]),
        ({"target": None}, ["None"]),
        ({"dtype": "int4"}, ["'int4'", "fp32, fp16, bf16"]),
        ({"schedules": "sm_80"}, ["'sm_80'"]),
        ({"pdl": "yes"}, ["pdl", "'yes'"]),
        ({"progress": 3}, ["progress", "3"]),
    ],
)
def test_compile_options_are_checked_in_one_place(options: dict[str, object], names: list[str]) -> None:
    with pytest.raises(CompileError) as info:
        CompileOptions(**options)  # type: ignore[arg-type]
    for name in names:
        assert name in str(info.value), (name, str(info.value))


def test_inferx_compile_refuses_bad_options_before_work(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="max_batch must be between 1 and"):
        inferx.compile(model_dir, output=tmp_path / "x.ixa", target="cpu", dtype="fp32", max_batch=-1)
    assert list(tmp_path.iterdir()) == []


def test_paths_given_as_strings_are_paths(tmp_path: Path) -> None:
    opts = CompileOptions(dump_ir=str(tmp_path), tuning_logs=str(tmp_path))  # type: ignore[arg-type]
    assert opts.dump_ir == tmp_path and opts.tuning_logs == tmp_path
    assert CompileOptions(dtype="f32").dtype == "f32"  # the IR's spelling, as before


def test_a_manifest_loading_would_refuse_is_never_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer refuses, before copying anything, a manifest past the bound loading reads."""
    from inferx.runtime import artifact_write

    monkeypatch.setattr(artifact_write, "MAX_MANIFEST_BYTES", 600)
    sections = {"compiler_version": "0", "triton_version": "0", "target": "cpu", "notes": "x" * 1000}
    out = tmp_path / "a"
    with pytest.raises(ArtifactError, match=r"the manifest would be \d+ bytes, past the 600 bytes loading reads"):
        artifact_write.write_artifact(out, sections, {"w.bin": b"\0" * 8})
    assert not out.exists() and list(tmp_path.iterdir()) == []
