"""Golden digests of compiled artifacts: what a refactor of the compiler must leave unchanged.

For each case (a tiny model of every family, on the cpu target, on the cpu target with the GPU
schedules, and built to sm_90 cubins; the fused decode templates; the 1B and 8B layer shapes on
the shipped tuning records) the digest holds the sha256 of every kernel source, cubin and weight
file, and of the launch plans and kernel launch metadata once parsed (the manifest's own format
may change; what it says about launching may not).

    python tests/golden.py record [--big]     # writes tests/golden/artifacts.json
    python tests/golden.py check [--big]      # compares, naming every file that differs

``tests/test_golden.py`` checks the tiny cases; ``--big`` adds the 1B and 8B layer shapes
(one decoder layer, a 1024-token vocabulary: the layer kernels' tasks are the real shapes', so
they take the shipped records), which take minutes and several GB of memory.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden" / "artifacts.json"
# Launch metadata of a kernel: what a runtime reads to launch it (its file names aside).
LAUNCH_KEYS = ("aliases", "constexprs", "extra_params", "global_scratch", "global_scratch_align", "grid",
               "grid_dependency", "launch_warps", "name", "num_stages", "num_warps", "params", "scratch", "shared")


@dataclass(frozen=True)
class GoldenCase:
    name: str
    model: Callable[[], Any]
    options: dict[str, Any]
    big: bool = False


def _tiny(case_name: str) -> Callable[[], Any]:
    def make() -> Any:
        sys.path.insert(0, str(HERE))
        import hf_models

        return hf_models.build(hf_models.CASES_BY_NAME[case_name])

    return make


def _shape(shape: str) -> Callable[[], Any]:
    def make() -> Any:
        import torch
        import transformers

        from inferx.benchmark.shapes import SHAPES

        cfg = dict(SHAPES[shape], num_hidden_layers=1, vocab_size=1024, bos_token_id=0, eos_token_id=1)
        torch.manual_seed(0)
        return transformers.LlamaForCausalLM(
            transformers.LlamaConfig(architectures=["LlamaForCausalLM"], **cfg)).eval()

    return make


def cases() -> list[GoldenCase]:
    sys.path.insert(0, str(HERE))
    import hf_models

    out: list[GoldenCase] = []
    for c in hf_models.CASES:
        context = c.kwargs.get("max_position_embeddings", c.kwargs.get("n_positions", 64))
        small = {"max_seq_len": min(64, context), "max_batch": 4}
        out.append(GoldenCase(f"{c.name}/cpu", _tiny(c.name), {"target": "cpu", "dtype": "fp32", **small}))
        out.append(GoldenCase(f"{c.name}/cpu-sm90-schedules", _tiny(c.name),
                              {"target": "cpu", "dtype": "fp32", "schedules": "sm_90", **small}))
    small = {"max_seq_len": 64, "max_batch": 4}
    per_family = ["llama-gqa2-hd40", "mistral-window5-gqa4", "qwen2-bias-gqa2", "phi3-partial-rotary-gqa4",
                  "gpt2-hd24"]
    for name in per_family:
        out.append(GoldenCase(f"{name}/h200", _tiny(name), {"target": "h200", "dtype": "bf16", **small}))
    fused = {"max_seq_len": 64, "max_batch": 4, "fuse_mlp": True, "fuse_attention_o": True}
    out.append(GoldenCase("llama-gqa2-hd40/h200-fused", _tiny("llama-gqa2-hd40"),
                          {"target": "h200", "dtype": "bf16", **fused}))
    out.append(GoldenCase("llama-gqa2-hd40/cpu-sm90-fused", _tiny("llama-gqa2-hd40"),
                          {"target": "cpu", "dtype": "fp32", "schedules": "sm_90", **fused}))
    out.append(GoldenCase("llama-gqa2-hd40/h200-overlap-nopdl", _tiny("llama-gqa2-hd40"),
                          {"target": "h200", "dtype": "bf16", "overlap": True, "pdl": False, **small}))
    for shape in ("1b", "8b"):
        out.append(GoldenCase(f"{shape}-layer/h200", _shape(shape),
                              {"target": "h200", "dtype": "bf16", "max_seq_len": 2048, "max_batch": 64}, big=True))
    return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canon(obj: Any) -> str:
    return _sha(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode())


def digest(artifact: Path) -> dict[str, str]:
    """{file or manifest part: sha256} of one artifact directory."""
    out: dict[str, str] = {}
    for p in sorted(artifact.rglob("*")):
        rel = p.relative_to(artifact).as_posix()
        if p.is_file() and rel.split("/")[0] in ("kernels", "weights"):
            out[rel] = _sha(p.read_bytes())
    man = json.loads((artifact / "manifest.json").read_text())
    for entry, plan in sorted(man["entries"].items()):
        out[f"plan:{entry}"] = _canon(plan)
    for name, meta in sorted(man["kernels"].items()):
        out[f"launch:{name}"] = _canon({k: meta.get(k) for k in LAUNCH_KEYS})
    out["weights-index"] = _canon({k: {"shape": v["shape"], "dtype": v["dtype"]} for k, v in man["weights"].items()})
    return out


def compute(selected: list[GoldenCase]) -> Iterator[tuple[str, dict[str, str]]]:
    import inferx

    for case in selected:
        with tempfile.TemporaryDirectory(prefix="inferx-golden-") as tmp:
            art = inferx.compile(case.model(), output=Path(tmp) / "a", **case.options)
            yield case.name, digest(art)


def compare(want: dict[str, str], got: dict[str, str]) -> list[str]:
    """Every key that differs, is missing or is new, one line each."""
    lines = []
    for k in sorted(set(want) | set(got)):
        if want.get(k) != got.get(k):
            what = "missing" if k not in got else "new" if k not in want else "differs"
            lines.append(f"{k}: {what}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("record", "check"))
    ap.add_argument("--big", action="store_true", help="the 1B and 8B layer shapes too")
    ap.add_argument("--only", default="", help="case names containing this text")
    args = ap.parse_args()
    selected = [c for c in cases() if (args.big or not c.big) and args.only in c.name]
    stored = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    bad = 0
    for name, d in compute(selected):
        if args.mode == "record":
            stored[name] = d
            GOLDEN.parent.mkdir(exist_ok=True)
            GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
            print(f"recorded {name}: {len(d)} digests", flush=True)
        else:
            diff = compare(stored.get(name, {}), d)
            bad += bool(diff)
            print(f"{name}: {'ok' if not diff else 'DIFFERS'}", flush=True)
            for line in diff:
                print(f"    {line}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
