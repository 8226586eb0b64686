"""The manifest's schema (inferx.runtime.manifest): a compiled artifact's manifest reads back to the
same JSON, and each rule of ``Manifest.from_sections`` refuses a manifest that breaks it with one
line naming the field and the value at fault."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as T

import inferx
from inferx.runtime.artifact import FORMAT_VERSION, ArtifactError, canonical_json, load_artifact
from inferx.runtime.artifact_write import write_artifact
from inferx.runtime.kernel_source import KernelSource, Param
from inferx.runtime.manifest import (
    ArgSpec,
    Binding,
    BufferSpec,
    EntryPlan,
    Fallback,
    KernelMeta,
    LaunchOptions,
    LaunchStep,
    Limits,
    Manifest,
    MemoryPlan,
    PlanBucket,
    Schedules,
    Tokenizer,
    WeightMeta,
)
from inferx.runtime.model_info import ModelInfo

FILES = ("kernels/k0.py", "weights/w.bin")


def _manifest() -> Manifest:
    """A small valid manifest: one kernel (two inputs, one output) launched once per entry."""
    ks = KernelSource(
        name="k0", template="gemm", source="",
        params=(Param("in0", "in", 0, dtype="i32"), Param("in1", "in", 1, dtype="f32"),
                Param("out0", "out", 0, dtype="f32"), Param("S_batch", "sym", symbol="batch")),
        grid=("(S_batch)",), constexprs={"BM": 16}, cost={"kv": "seq", "per_row": False, "flops": "largest_weight"})
    entry = EntryPlan(
        args=(ArgSpec("input_ids", ("(S_batch)", "1"), "i32"),),
        launches=(LaunchStep("k0", (Binding("arg", index=0), Binding("weight", name="w")),
                             (Binding("buffer", name="k0#0"),)),),
        buffers={"k0#0": BufferSpec(("(S_batch)", "8"), "f32")},
        returns=(Binding("buffer", name="k0#0"),))
    return Manifest(
        compiler_version="0.1", triton_version="3.6", target="cpu",
        model=ModelInfo("llama", vocab_size=8, max_context=16, eos_token_ids=(2,), num_layers=1, num_kv_heads=1,
                        head_dim=8),
        limits=Limits(2, 16), launch=LaunchOptions(pdl=False, overlap=False),
        entries={"prefill": entry, "decode": entry},
        kernels={"k0": KernelMeta(ks, "kernels/k0.py")},
        weights={"w": WeightMeta("weights/w.bin", (8, 8), "f32")},
        memory_plan={"prefill": None, "decode": MemoryPlan("plan", (PlanBucket({"batch": 1}, 64, 128, 0),))},
        schedules=Schedules(None, {}, {"k0": Fallback(None, "no record")}, "no tuning database"),
        weights_format="raw", tokenizer=Tokenizer())


def _stored(m: Manifest | None = None) -> dict[str, Any]:
    """``m`` as a loaded artifact's manifest holds it: JSON, with the container's keys."""
    files = {name: {"sha256": "0" * 64, "size": 0} for name in FILES}
    sections = json.loads(canonical_json((m or _manifest()).to_sections()))
    return {**sections, "magic": "inferx-artifact", "format_version": FORMAT_VERSION, "files": files}


def _refused(edit: Callable[[dict[str, Any]], object], message: str) -> None:
    d = _stored()
    edit(d)
    with pytest.raises(ArtifactError) as e:
        Manifest.from_sections(d, "a.ixa")
    assert str(e.value) == f"a.ixa: manifest.json: {message}"


def test_a_manifest_reads_back_to_the_same_sections() -> None:
    d = _stored()
    m = Manifest.from_sections(d, "a.ixa")
    assert json.loads(canonical_json(m.to_sections())) == {k: v for k, v in d.items()
                                                           if k not in ("magic", "format_version", "files")}
    assert m == Manifest.from_sections(_stored(m), "a.ixa")
    m.check(FILES, "a.ixa")


def test_a_missing_section_is_named() -> None:
    _refused(lambda d: d.pop("limits"), "limits: missing section")
    _refused(lambda d: d["limits"].pop("max_seq_len"), "limits.max_seq_len: missing")
    _refused(lambda d: d["entries"].pop("decode"), "entries.decode: missing entry point")
    _refused(lambda d: d.update(extras={}), "extras: unknown section")
    _refused(lambda d: d["launch"].update(graphs=True), "launch.graphs: unknown field")


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["limits"].update(max_batch="4"), "limits.max_batch: '4' is not an integer"),
    (lambda d: d["limits"].update(max_batch=0), "limits.max_batch: 0 is below 1"),
    (lambda d: d["launch"].update(pdl=1), "launch.pdl: 1 is not a boolean"),
    (lambda d: d["model"].update(eos_token_ids=[2.0]), "model.eos_token_ids[0]: 2.0 is not an integer"),
    (lambda d: d["model"].update(dtype="f33"), "model.dtype: 'f33' is not one of f32, f16, bf16, f8e4m3, i8, i4, "
                                              "i32, i64, bool"),
    (lambda d: d["kernels"]["k0"].update(num_warps=4.0), "kernels.k0.num_warps: 4.0 is not an integer"),
    (lambda d: d["kernels"]["k0"]["params"][3].update(kind="ptr"),
     "kernels.k0.params[3].kind: 'ptr' is not one of in, out, sym, scratch"),
    (lambda d: d["kernels"]["k0"].update(cubin="kernels/k0.cubin"), "kernels.k0.shared: missing"),
    (lambda d: d["entries"]["decode"].update(launches={}), "entries.decode.launches: {} is not a list"),
    (lambda d: d["entries"]["decode"]["launches"][0]["outputs"][0].update(kind="weight"),
     "entries.decode.launches[0].outputs[0].kind: 'weight': a launch writes buffers alone"),
    (lambda d: d["entries"]["decode"]["buffers"]["k0#0"].update(shape=[8]),
     "entries.decode.buffers['k0#0'].shape[0]: 8 is not a string"),
    (lambda d: d["weights"]["w"].update(shape=[8, -1]), "weights.w.shape[1]: -1 is below 0"),
    (lambda d: d["schedules"].update(fallbacks=[]), "schedules.fallbacks: [] is not an object"),
    (lambda d: d["tokenizer"].update(files="tokenizer.json"), "tokenizer.files: 'tokenizer.json' is not a list"),
])
def test_a_wrong_type_is_named(edit: Callable[[dict[str, Any]], object], message: str) -> None:
    _refused(edit, message)


def test_a_launch_naming_an_unknown_kernel_is_refused() -> None:
    launch = ["entries", "decode", "launches", 0]
    _refused(lambda d: _at(d, launch).update(kernel="k9"), "entries.decode.launches[0].kernel: 'k9' names no kernel")
    _refused(lambda d: _at(d, launch).update(by_rows=[[1, "k0"], [4, "k9"]]),
             "entries.decode.launches[0].by_rows[1][1]: 'k9' names no kernel")
    _refused(lambda d: _at(d, launch).update(by_rows=[[4, "k0"], [1, "k0"]]),
             "entries.decode.launches[0].by_rows[1][0]: 1 does not ascend from 4")
    _refused(lambda d: d["schedules"]["fallbacks"].update(k9={"task": None, "reason": ""}),
             "schedules.fallbacks.k9: names no kernel")
    _refused(lambda d: d["kernels"]["k0"].update(name="k1"), "kernels.k0.name: 'k1' is not the kernel's key")


def test_a_binding_naming_an_unknown_weight_or_buffer_is_refused() -> None:
    inputs = ["entries", "prefill", "launches", 0, "inputs"]
    _refused(lambda d: _at(d, inputs)[1].update(name="w2"), "entries.prefill.launches[0].inputs[1].name: 'w2' names "
                                                            "no weight")
    _refused(lambda d: _at(d, inputs)[1].update(kind="buffer", name="x"),
             "entries.prefill.launches[0].inputs[1].name: 'x' names no buffer of the entry")
    _refused(lambda d: _at(d, inputs)[1].update(kind="buffer", name="k0#0"),
             "entries.prefill.launches[0].inputs[1].name: buffer 'k0#0' is read before a launch writes it")
    _refused(lambda d: _at(d, inputs)[0].update(index=1),
             "entries.prefill.launches[0].inputs[0].index: 1 is past the entry's 1 arguments")
    _refused(lambda d: _at(d, inputs).pop(),
             "entries.prefill.launches[0].inputs: kernel 'k0' uses input 1, the launch binds 1")
    _refused(lambda d: d["entries"]["prefill"]["returns"][0].update(name="y"),
             "entries.prefill.returns[0].name: 'y' names no buffer of the entry")


def test_every_file_named_is_a_file_of_the_artifact() -> None:
    _refused(lambda d: d["files"].pop("kernels/k0.py"),
             "kernels.k0.file: 'kernels/k0.py' is not a file of the artifact")
    _refused(lambda d: d["files"].pop("weights/w.bin"),
             "weights.w.file: 'weights/w.bin' is not a file of the artifact")
    _refused(lambda d: d["tokenizer"].update(files=["tokenizer/t.json"]),
             "tokenizer.files[0]: 'tokenizer/t.json' is not a file of the artifact")


def test_a_version_mismatch_is_refused() -> None:
    _refused(lambda d: d.update(format_version=2), "format_version: 2: this runtime reads version 3: compile the "
                                                   "model again")
    _refused(lambda d: d.update(format_version=4), "format_version: 4: this runtime reads version 3: upgrade inferx")
    _refused(lambda d: d.pop("format_version"), "format_version: missing")


def test_a_writer_checks_what_it_writes() -> None:
    m = _manifest()
    bad = replace(m, weights={})
    with pytest.raises(ArtifactError, match=r"^out: manifest.json: entries.decode.launches\[0\].inputs\[1\].name: "
                                            r"'w' names no weight$"):
        bad.check(FILES, "out")
    with pytest.raises(ArtifactError, match="'weights/w.bin' is not a file of the artifact"):
        m.check(["kernels/k0.py"], "out")


def test_loading_an_artifact_with_a_bad_manifest_names_the_field(tmp_path: Path) -> None:
    d = _stored()
    d["entries"]["decode"]["launches"][0]["kernel"] = "k9"
    sections = {k: v for k, v in d.items() if k not in ("magic", "format_version", "files")}
    art = write_artifact(tmp_path / "a", sections, {"kernels/k0.py": b"", "weights/w.bin": bytes(256)})
    with pytest.raises(ArtifactError, match=r"a: manifest.json: entries.decode.launches\[0\].kernel: 'k9' names no"):
        inferx.load(art, device="cpu")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=40, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return inferx.compile(T.LlamaForCausalLM(cfg).eval(), target="cpu", output=tmp_path_factory.mktemp("m") / "a",
                          dtype="fp32", max_seq_len=16, max_batch=2, schedules="sm_90")


def test_a_compiled_manifest_reads_back_to_its_own_bytes(compiled: Path) -> None:
    art = load_artifact(compiled)
    m = Manifest.from_sections(art.manifest, art.path)
    assert canonical_json(m.to_sections()) == canonical_json(art.sections())
    assert any(s.by_rows for s in m.entries["decode"].launches)  # per-bucket variants, on the GPU schedules
    edited = copy.deepcopy(dict(art.manifest))
    edited["weights"][sorted(edited["weights"])[0]]["dtype"] = 32
    with pytest.raises(ArtifactError, match=r"manifest.json: weights\['.*'\].dtype: 32 is not one of f32"):
        Manifest.from_sections(edited, art.path)


def _at(d: Any, path: list[Any]) -> Any:
    for key in path:
        d = d[key]
    return d
