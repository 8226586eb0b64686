"""Loading artifacts from untrusted sources: a manifest is data (its expressions parsed by a small
grammar, never evaluated; its names never paths unchecked; its sizes bounded and checked against
each other and the weights before anything is allocated), and an artifact's kernel sources run
only after every check passed: never for ``inspect``, never after a failed verification, and
never a file planted in the kernel cache instead. A CPU session loads whatever order Triton and
``TRITON_INTERPRET`` came in.

Artifacts are one tiny model compiled once for the CPU; each case copies it, edits it the way an
attacker or a broken disk would (re-hashing the manifest where the edit must get past the
container's integrity check) and loads it."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import transformers as T
from click.testing import CliRunner

import inferx
from inferx.cli import main
from inferx.runtime import artifact as container
from inferx.runtime import expr, loaded, triton_kernels
from inferx.runtime.artifact import ArtifactError, load_artifact
from inferx.runtime.kernel_source import KernelSource, Param
from inferx.runtime.loaded import ArtifactSession
from inferx.runtime.session import SessionError

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 96
# The one place InferX runs text it did not write in this process (docs/architecture.md, "Trust").
KERNEL_LOADING_STEP = ("inferx/runtime/triton_kernels.py", "load_kernel")
Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def art(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return inferx.compile(
        T.LlamaForCausalLM(cfg).eval(),
        target="cpu",
        output=tmp_path_factory.mktemp("m") / "a",
        dtype="fp32",
        max_seq_len=16,
        max_batch=2,
    )


@pytest.fixture(scope="module")
def tokens(art: Path) -> list[int]:
    return [int(t) for t in inferx.load(art, device="cpu").generate([[1, 2, 3]], 3)[0]]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _copy(
    art: Path,
    out: Path,
    edit: Callable[[Manifest], object] | None = None,
    files: dict[str, bytes] | None = None,
    rehash: bool = True,
) -> Path:
    """A copy of ``art`` with ``files`` replaced and the manifest edited; the manifest's hashes
    redone (``rehash``) as an attacker would, else left as they were."""
    shutil.copytree(art, out)
    m = json.loads((out / "manifest.json").read_text())
    for name, data in (files or {}).items():
        (out / name).write_bytes(data)
        if rehash:
            m["files"][name] = {"sha256": _sha(data), "size": len(data)}
    if edit is not None:
        edit(m)
    if rehash:
        m = container._with_self_hash(m)
    (out / "manifest.json").write_bytes(container.canonical_json(m))
    return out


def _kernels(art: Path) -> dict[str, Any]:
    return dict(json.loads((art / "manifest.json").read_text())["kernels"])


def _marked(source: bytes, marker: Path) -> bytes:
    """``source`` with a first line that leaves a file behind when the module runs."""
    return f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n".encode() + source


def _refused(path: Path, *names: str) -> str:
    with pytest.raises(ArtifactError) as e:
        inferx.load(path, device="cpu")
    text = str(e.value)
    assert "\n" not in text
    for name in names:
        assert name in text, (name, text)
    return text


# --- 1. no eval: expressions parsed by a grammar --------------------------------------------


def _builtin_calls(tree: ast.AST, names: tuple[str, ...]) -> list[tuple[str, str]]:
    """(innermost enclosing function, builtin) for each call of one of ``names``."""
    found: list[tuple[str, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            where = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names:
            found.append((where, node.func.id))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(tree, "<module>")
    return found


def test_no_eval_or_exec_of_data_in_inferx() -> None:
    """No call of eval, exec or compile (the builtins) anywhere in inferx/ but the documented
    kernel-loading step, and no module loaded from a path by importlib."""
    found = set()
    for path in sorted((ROOT / "inferx").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text()
        found |= {(rel, *call) for call in _builtin_calls(ast.parse(text), ("eval", "exec", "compile", "__import__"))}
        assert "exec_module" not in text, rel
    assert found == {(*KERNEL_LOADING_STEP, "compile"), (*KERNEL_LOADING_STEP, "exec")}, found


@pytest.mark.parametrize(
    "text, value",
    [
        ("((((S_batch * S_seq)) + 63) // 64) * 1 * 64", 64),
        ("cdiv((S_batch * S_seq), 16)", 2),
        ("min(cdiv((S_batch * S_seq), 64) * 12, 1 * 132)", 12),
        ("(S_batch) * 2 * 2 * 16 * 16", 2048),
        ("max(S_ctx - 5, 3) % 4 + -S_batch", 1),
        ("7", 7),
    ],
)
def test_expressions_the_compiler_writes_evaluate(text: str, value: int) -> None:
    assert expr.evaluate(text, {"batch": 2, "seq": 16, "ctx": 16}) == value


@pytest.mark.parametrize(
    "text, problem",
    [
        ("__import__('os').system('true')", "unexpected"),
        ("S_batch.__class__", "unexpected"),
        ("lambda: 1", "unexpected"),
        ("S_vocab * 2", "S_vocab is no symbol"),
        ("1 / 2", "unexpected"),
        ("9" * 30, "past the bound 2**40"),
        ("(" * 40 + "1" + ")" * 40, "nested deeper"),
        ("cdiv(4)", "cdiv takes 2 arguments"),
        ("1 " * 400, "past the bound 512"),
        ("", "is empty"),
    ],
)
def test_expressions_outside_the_grammar_are_refused(text: str, problem: str) -> None:
    with pytest.raises(expr.ExprError, match=problem.replace("*", r"\*").replace("(", r"\(")):
        expr.parse(text)


def test_bounds_cover_every_value_and_refuse_zero_divisors() -> None:
    ranges = expr.symbol_ranges(4, 32)
    e = expr.parse("cdiv(S_batch * S_seq, 16) - S_ctx // 8 + S_seq % 5")
    lo, hi = e.bounds(ranges)
    values = [e.value({"batch": b, "seq": s, "ctx": c}) for b in range(1, 5) for s in range(1, 33) for c in (1, 9, 32)]
    assert lo <= min(values) and max(values) <= hi
    with pytest.raises(expr.ExprError, match="divisor of '//' may be 0"):
        expr.parse("S_batch // (S_seq - 1)").bounds(ranges)
    with pytest.raises(expr.ExprError, match="past the bound 2\\*\\*62"):
        expr.parse("S_batch * 1099511627776 * 1099511627776").bounds(ranges)


def test_a_grid_that_would_run_code_is_refused_and_runs_nothing(art: Path, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    name = sorted(_kernels(art))[0]
    code = f"__import__('os').system('touch {marker}')"
    bad = _copy(art, tmp_path / "a", lambda m: m["kernels"][name].update(grid=[code]))
    _refused(bad, f"kernels.{name}.grid[0]", "__import__")
    assert not marker.exists()


@pytest.mark.parametrize(
    "field, value, problem",
    [
        ("grid", ["S_batch * 4294967296"], "past the bound 2147483647"),
        ("grid", ["1", "70000"], "past the bound 65535"),
        ("grid", ["99999999999999999999999999"], "past the bound 2**40"),
        ("grid", ["S_batch // (S_seq - 1)"], "divisor"),
        ("grid", ["1", "1", "1", "1"], "a grid has 1 to 3"),
        ("num_warps", 10**30, "past the bound"),
    ],
)
def test_a_huge_grid_or_integer_names_the_kernel(
    art: Path, tmp_path: Path, field: str, value: Any, problem: str
) -> None:
    name = sorted(_kernels(art))[0]
    bad = _copy(art, tmp_path / "a", lambda m: m["kernels"][name].update({field: value}))
    _refused(bad, f"kernels.{name}.{field}", problem)


# --- 2. names are not paths; the kernel cache is private and verified ------------------------


def test_a_kernel_name_with_a_path_is_refused(art: Path, tmp_path: Path) -> None:
    name = sorted(_kernels(art))[0]
    bad = _copy(art, tmp_path / "a", lambda m: m["kernels"][name].update(name="../../escaped"))
    _refused(bad, f"kernels.{name}.name", "'../../escaped' is not an identifier")
    ks = KernelSource("../escaped", "t", "", (), ("1",))
    with pytest.raises(ArtifactError, match="not an identifier"):
        triton_kernels.load_kernel(ks, interpret=True)


def _kernel(body: str = "    pass\n") -> KernelSource:
    source = f"import triton\n\n\n@triton.jit\ndef k_demo(out0, S_batch):\n{body}"
    return KernelSource(
        "k_demo", "t", source, (Param("out0", "out", 0, dtype="f32"), Param("S_batch", "sym", symbol="batch")), ("1",)
    )


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kernels"
    monkeypatch.setattr(triton_kernels, "CACHE", path)
    return path


def test_the_kernel_cache_is_private(cache: Path) -> None:
    triton_kernels.load_kernel(_kernel(), interpret=True)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    cache.chmod(0o777)  # one of this user's, left open: closed again
    triton_kernels.load_kernel(_kernel(), interpret=True)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    shutil.rmtree(cache)
    cache.symlink_to(cache.parent)
    with pytest.raises(PermissionError, match="symlink"):
        triton_kernels.load_kernel(_kernel(), interpret=True)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_kernel_cache_of_another_user_is_refused(cache: Path) -> None:
    cache.mkdir(mode=0o700)
    os.chown(cache, 4321, 4321)
    with pytest.raises(PermissionError, match="owned by user 4321"):
        triton_kernels.load_kernel(_kernel(), interpret=True)


def test_a_file_planted_in_the_kernel_cache_never_runs(cache: Path, tmp_path: Path) -> None:
    ks = _kernel()
    marker = tmp_path / "planted-ran"
    digest = _sha(ks.source.encode())
    cache.mkdir(mode=0o700)
    planted = cache / f"{ks.name}_{digest[:16]}.py"
    planted.write_bytes(_marked(ks.source.encode(), marker))
    fn = triton_kernels.load_kernel(ks, interpret=True)
    out = torch.zeros(1)
    fn[(1,)](out, 1)
    assert not marker.exists()
    assert planted.read_text() == ks.source  # rewritten with the verified text


# --- 3. kernel sources run after verification alone, never for inspect ----------------------


def test_a_failed_verification_runs_no_kernel(art: Path, tmp_path: Path) -> None:
    """One kernel valid but marked (re-hashed), the last one tampered without: neither a full
    load nor a session over a structure-verified artifact runs any source."""
    names = sorted(_kernels(art))
    first, last = (_kernels(art)[n]["file"] for n in (names[0], names[-1]))
    marker = tmp_path / "ran"
    marked = _copy(art, tmp_path / "a", files={first: _marked((art / first).read_bytes(), marker)})
    (marked / last).write_bytes((art / last).read_bytes()[:-2] + b"#\n")  # same size, other bytes
    _refused(marked, last, "sha256 mismatch")
    with pytest.raises(ArtifactError, match="sha256 mismatch"):
        ArtifactSession(load_artifact(marked, verify="structure"), device="cpu")
    assert not marker.exists()


def test_a_source_that_is_not_the_manifests_kernel_runs_nothing(art: Path, tmp_path: Path) -> None:
    name = sorted(_kernels(art))[0]
    file = _kernels(art)[name]["file"]
    marker = tmp_path / "ran"
    source = (art / file).read_bytes()
    renamed = _marked(source.replace(f"def {name}(".encode(), b"def other("), marker)
    _refused(_copy(art, tmp_path / "a", files={file: renamed}), file, f"defines no function {name!r}")
    fewer = _marked(source.replace(b"(in0, ", b"("), marker)
    _refused(_copy(art, tmp_path / "b", files={file: fewer}), file, "not the parameters the manifest declares")
    _refused(_copy(art, tmp_path / "c", files={file: b"\xff\xfe" + source}), file, "not UTF-8")
    assert not marker.exists()


def test_inspect_never_runs_kernel_source(art: Path, tmp_path: Path) -> None:
    """A consistent artifact whose kernel leaves a marker: ``inspect`` reads it without running
    any source; a session runs it (an artifact is code: that is the trust model)."""
    name = sorted(_kernels(art))[0]
    file = _kernels(art)[name]["file"]
    marker = tmp_path / "ran"
    marked = _copy(art, tmp_path / "a", files={file: _marked((art / file).read_bytes(), marker)})
    result = CliRunner().invoke(main, ["inspect", str(marked)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert not marker.exists()
    inferx.load(marked, device="cpu")
    assert marker.exists()


# --- 4. sizes: capped before reading, checked against each other before allocating ----------


def test_a_huge_sparse_manifest_is_refused_without_reading_it(tmp_path: Path) -> None:
    directory = tmp_path / "a"
    directory.mkdir()
    with (directory / "manifest.json").open("wb") as f:
        f.truncate(3 << 29)  # 1.5 GiB of holes
    start = time.process_time()
    with pytest.raises(ArtifactError, match="manifest.json: 1610612736 bytes, past the bound"):
        load_artifact(directory)
    m_len = 3 << 29
    payload = -(-(64 + m_len) // 64) * 64
    packed = tmp_path / "a.ixa"
    with packed.open("wb") as f:
        f.write(
            struct.pack(
                "<8sIIQQQ24s", container.PACKED_MAGIC, container.FORMAT_VERSION, 64, m_len, payload, payload, bytes(24)
            )
        )
        f.truncate(payload)
    with pytest.raises(ArtifactError, match="header: manifest length 1610612736, past the bound"):
        load_artifact(packed)
    assert time.process_time() - start < 5  # not read: reading 1.5 GiB twice takes longer


def _logits_width(width: int) -> Callable[[Manifest], None]:
    def edit(m: Manifest) -> None:
        for entry in m["entries"].values():
            buf = entry["buffers"][entry["returns"][0]["name"]]
            buf["shape"][-1] = str(width)
        m["model"]["vocab_size"] = width

    return edit


def test_a_vocabulary_that_disagrees_with_the_weights_is_refused(art: Path, tmp_path: Path) -> None:
    """It segfaulted a CPU run: token ids past the embedding's rows were read."""
    bad = _copy(art, tmp_path / "a", lambda m: m["model"].update(vocab_size=4 * VOCAB))
    _refused(bad, "shape", f"the logits are '{VOCAB}' wide, model.vocab_size is {4 * VOCAB}")
    bad = _copy(art, tmp_path / "b", _logits_width(4 * VOCAB))
    _refused(
        bad, "weights['model.embed_tokens.weight'].shape", "reads it by token id", f"model.vocab_size is {4 * VOCAB}"
    )


@pytest.mark.parametrize(
    "edit, names",
    [
        (lambda m: m["model"].update(num_layers=10**9), ("model.num_layers", "past the bound 65536")),
        (lambda m: m["model"].update(num_layers=2), ("entries.decode.args", "the model's 2 layers make 7")),
        (lambda m: m["model"].update(head_dim=4096), ("entries.decode.args[3]", "head_dim")),
        (lambda m: m["limits"].update(max_seq_len=1 << 20), ("limits.max_seq_len", "model.max_context 64")),
        (lambda m: m["model"].update(kv_paging={"block_size": 4, "blocks": 8, "blocks_per_seq": 16}),
         ("entries.decode.args", "then a K and a V cache per layer", "the block table")),
        (lambda m: m["model"].update(kv_paging={"block_size": 0, "blocks": 8, "blocks_per_seq": 16}),
         ("model.kv_paging.block_size", "0")),
        (lambda m: m["limits"].update(max_batch=10**30), ("limits.max_batch", "past the bound")),
        (
            lambda m: m["weights"]["model.embed_tokens.weight"].update(shape=[VOCAB, 65]),
            ("weights['model.embed_tokens.weight'].shape", "holds 24576"),
        ),
        (
            lambda m: next(iter(m["entries"]["decode"]["buffers"].values())).update(shape=["S_batch * 1099511627776"]),
            ("entries.decode.buffers", "takes more than 1099511627776 bytes"),
        ),
        (
            lambda m: next(iter(m["entries"]["decode"]["buffers"].values())).update(shape=["S_batch - 5"]),
            ("entries.decode.buffers", "a dim is never negative"),
        ),
    ],
)
def test_sizes_are_checked_against_each_other_before_allocation(
    art: Path, tmp_path: Path, edit: Callable[[Manifest], object], names: tuple[str, ...]
) -> None:
    _refused(_copy(art, tmp_path / "a", edit), *names)


def _logits_shape(shape: list[str]) -> Callable[[Manifest], None]:
    def edit(m: Manifest) -> None:
        entry = m["entries"]["prefill"]
        entry["buffers"][entry["returns"][0]["name"]]["shape"] = shape

    return edit


@pytest.mark.parametrize(
    "edit, names",
    [
        (_logits_shape(["S_seq", str(VOCAB)]), ("entries.prefill.buffers", "[batch, seq, vocab]")),
        (_logits_shape(["S_batch", "2", str(VOCAB)]), ("entries.prefill.buffers", "[batch, seq, vocab]")),
        (lambda m: next(iter(m["kernels"].values()))["constexprs"].update(BM=0), ("constexprs.BM", "0 is below 1")),
        (lambda m: next(iter(m["kernels"].values()))["constexprs"].update(BM=24), ("constexprs.BM", "powers of two")),
    ],
    ids=["logits-2d", "logits-fixed-seq", "constexpr-zero", "constexpr-not-pow2"],
)
def test_logits_shape_and_constexprs_are_checked(
    art: Path, tmp_path: Path, edit: Callable[[Manifest], object], names: tuple[str, ...]
) -> None:
    """A fuzzed manifest returned logits of another shape; a BK of 0 failed inside Triton."""
    _refused(_copy(art, tmp_path / "a", edit), *names)


def test_a_kernel_that_fails_in_the_interpreter_names_itself(art: Path, tmp_path: Path) -> None:
    """A kernel that fails at run time (here a division by zero in its body): an ArtifactError
    naming the kernel, not Triton's own error."""
    name = json.loads((art / "manifest.json").read_text())["entries"]["prefill"]["launches"][0]["kernel"]
    meta = _kernels(art)[name]
    source = (art / meta["file"]).read_text()
    head = source.index(f"def {name}(")
    body = source.index("\n", head) + 1
    failing = source[:body] + "    _ = 1 // 0\n" + source[body:]
    bad = _copy(art, tmp_path / "a", files={meta["file"]: failing.encode()})
    session = inferx.load(bad, device="cpu")
    with pytest.raises(ArtifactError, match=f"kernel {name} failed in Triton's interpreter"):
        session.prefill(np.array([[1, 2]]))


def test_a_grid_too_large_to_interpret_is_refused_for_a_cpu_session(art: Path, tmp_path: Path) -> None:
    """Within CUDA's bounds, but hours of work for Triton's interpreter."""
    name = sorted(_kernels(art))[0]
    bad = _copy(art, tmp_path / "a", lambda m: m["kernels"][name].update(grid=["S_batch * 100000000"]))
    with pytest.raises(SessionError, match=f"kernel {name} launches up to 200000000 programs"):
        inferx.load(bad, device="cpu")


def test_memory_is_checked_before_weights_and_caches_are_made(
    art: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loaded, "host_memory", lambda: 1024)
    with pytest.raises(SessionError, match="the weights take .* GiB; this host has"):
        inferx.load(art, device="cpu")
    weights = sum(
        e["size"]
        for n, e in json.loads((art / "manifest.json").read_text())["files"].items()
        if n.startswith("weights/")
    )
    monkeypatch.setattr(loaded, "host_memory", lambda: weights + 1024)
    session = inferx.load(art, device="cpu")
    with pytest.raises(SessionError, match="the weights and the KV cache of 1 sequences of 16 tokens take"):
        session.prefill([[1, 2, 3]])
    big = _copy(
        art,
        tmp_path / "a",
        lambda m: next(iter(m["entries"]["prefill"]["buffers"].values())).update(shape=["S_batch * 1000000000"]),
    )
    monkeypatch.setattr(loaded, "host_memory", lambda: 1 << 31)
    session = inferx.load(big, device="cpu")
    with pytest.raises(SessionError, match=r"the weights and a buffer \[1000000000\] of f32 take"):
        session.prefill([[1, 2, 3]])


# --- 5. a missing section or a wrong type names the field ------------------------------------


@pytest.mark.parametrize(
    "edit, names",
    [
        (lambda m: m.pop("limits"), ("limits: missing section",)),
        (lambda m: m.pop("kernels"), ("kernels: missing section",)),
        (lambda m: m.update(entries=[]), ("entries: [] is not an object",)),
        (lambda m: m["model"].update(vocab_size="96"), ("model.vocab_size: '96' is not an integer",)),
        (lambda m: m["model"].update(eos_token_ids=["2"]), ("model.eos_token_ids[0]: '2' is not an integer",)),
        (lambda m: m["entries"]["decode"].update(args={}), ("entries.decode.args: {} is not a list",)),
        (lambda m: next(iter(m["kernels"].values())).update(params=None), ("params: None is not a list",)),
    ],
)
def test_a_missing_section_or_wrong_type_names_the_field(
    art: Path, tmp_path: Path, edit: Callable[[Manifest], object], names: tuple[str, ...]
) -> None:
    bad = _copy(art, tmp_path / "a", edit)
    _refused(bad, *names)
    result = CliRunner().invoke(main, ["inspect", str(bad)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert result.stderr.strip().splitlines()[-1].startswith("error: "), result.stderr
    assert names[0] in result.stderr


# --- 6. a CPU session whatever order Triton was imported in ---------------------------------


def test_a_cpu_session_loads_after_triton_was_imported_for_compiling(art: Path, tokens: list[int]) -> None:
    """As in a notebook where transformers imported Triton before TRITON_INTERPRET was set."""
    code = (
        "import os, triton, triton.language\n"
        "assert os.environ.get('TRITON_INTERPRET') is None\n"
        "import inferx\n"
        f"s = inferx.load({str(art)!r}, device='cpu')\n"
        "print('TOKENS', s.generate([[1, 2, 3]], 3)[0].tolist())\n"
        "print('MODE', os.environ.get('TRITON_INTERPRET'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"TOKENS {tokens}" in proc.stdout, (proc.stdout, tokens)
    assert "MODE None" in proc.stdout  # the process's own setting is left as it was


def test_interpreted_launches_restore_tritons_library(art: Path) -> None:
    """After an interpreted launch, Triton's library functions are what they were."""
    import triton.language as tl

    before = (tl.sum, tl.cdiv, tl.core.tensor.sum)
    session = inferx.load(art, device="cpu")
    logits = np.asarray(session.prefill([[1, 2, 3]]))
    assert logits.shape == (1, 3, VOCAB) and np.isfinite(logits).all()
    assert (tl.sum, tl.cdiv, tl.core.tensor.sum) == before
