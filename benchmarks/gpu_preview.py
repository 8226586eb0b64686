"""A first look at the generated kernels on an H200 (not the GPU runtime: that is still to come).

1. Numerics: a tiny Llama in bf16, prefill and decode through the generated kernels (Triton JIT on
   the device, launched from torch), against HF transformers in bf16 on the same GPU.
2. Speed: one decode step of Llama-3.2-1B- and Llama-3-8B-shaped models (random bf16 weights made
   on the GPU) at batch 1, context 512: plain launches and one CUDA graph replay, CUDA events
   after warm-up, medians; against the memory roofline (weights + KV bytes / measured copy rate).

    python benchmarks/gpu_preview.py [--out results.json] [--device cpu]   # cpu: interpreter smoke
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from inferx.compiler.codegen import generate  # noqa: E402
from inferx.compiler.driver import _entry_plan, _recipe  # noqa: E402
from inferx.compiler.ir.ops_kernel import KernelOp  # noqa: E402
from inferx.compiler.ir.ops_tensor import ConcatOp, WeightOp  # noqa: E402
from inferx.compiler.ir.types import TensorType  # noqa: E402
from inferx.models.decoder import build_decoder_module  # noqa: E402
from inferx.models.registry import decoder_config  # noqa: E402
from inferx.passes import registry  # noqa: E402
from inferx.passes.pipeline import PassManager, parse  # noqa: E402
from inferx.runtime.plan import bind, run  # noqa: E402
from inferx.runtime.triton_kernels import load_kernel  # noqa: E402

TORCH = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64}


class GpuWeights:
    """Names weight-only values like the driver does; leaves come from ``leaves`` (name -> tensor)."""

    def __init__(self, leaves: dict[str, torch.Tensor]):
        self.leaves = leaves
        self.stored: dict[str, torch.Tensor] = {}
        self._names: dict = {}

    def name_of(self, v) -> str:  # noqa: ANN001
        if v in self._names:
            return self._names[v]
        owner = v.owner
        if isinstance(owner, WeightOp):
            name = owner.attributes["name"].data
            self.stored[name] = self.leaves[name]
        elif isinstance(owner, ConcatOp):
            name = "derived." + str(abs(hash(_recipe(owner, self))))
            parts = [self.stored[self.name_of(x)] for x in owner.operands]
            dim = owner.attributes["dim"].value.data
            self.stored[name] = torch.cat(parts, dim=dim).contiguous()
        else:
            raise ValueError(f"cannot fold {owner.name} on the GPU preview")
        self._names[v] = name
        return name


def build(raw: dict, dtype: str):
    cfg = decoder_config(raw)
    from dataclasses import replace

    cfg = replace(cfg, dtype=dtype)
    module = build_decoder_module(cfg)
    PassManager(parse("canonicalize,cse,dce,merge-gemms,dce,fuse", registry())).run(module)
    return cfg, module


class Runner:
    """Runs one entry point's launch plan with torch tensors on ``device``."""

    def __init__(self, module, weights: GpuWeights, entry: str, interpret: bool):  # noqa: ANN001
        func = next(f for f in module.ops if f.sym_name.data == entry)
        named, self.sources = [], {}
        for kop in [o for o in func.body.block.ops if isinstance(o, KernelOp)]:
            ks = generate(kop, "kernel")
            name = f"{kop.template.data}_{abs(hash(ks.source)) % 10**12}"
            if name not in self.sources:
                ks = generate(kop, name)
                self.sources[name] = (ks, load_kernel(ks, interpret=interpret))
            named.append((kop, name))
        self.plan = _entry_plan(func, named, weights)
        self.weights = weights

    def bind(self, args: list[torch.Tensor], env: dict[str, int]) -> list:
        """Allocates every buffer once and returns the bound launches (see inferx.runtime.plan)."""
        dev = args[0].device
        launches, self.returns = bind(self.plan, self.sources, args, self.weights.stored, env,
                                      lambda shape, dtype: torch.empty(shape, dtype=TORCH[dtype], device=dev),
                                      lambda shape, dtype: torch.zeros(shape, dtype=TORCH[dtype], device=dev))
        return launches

    @staticmethod
    def run(calls: list) -> None:
        run(calls)


def numerics(device: str, interpret: bool) -> dict:
    import transformers as T

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256)
    dtype = "bf16" if device == "cuda" else "f32"
    model = T.LlamaForCausalLM(cfg).to(device=device, dtype=TORCH[dtype]).eval()
    raw = dict(cfg.to_dict(), model_type="llama")
    _, module = build(raw, dtype)
    weights = GpuWeights({k: v.detach().contiguous() for k, v in model.state_dict().items()})
    B, S, CTX = 2, 12, 64
    ids = torch.randint(0, 256, (B, S), device=device, dtype=torch.int32)
    pos = torch.arange(S, device=device, dtype=torch.int32).repeat(B, 1)
    kvl = torch.full((B,), S, device=device, dtype=torch.int32)
    caches = [torch.zeros(B, 2, CTX, 32, device=device, dtype=TORCH[dtype]) for _ in range(4)]
    r = Runner(module, weights, "prefill", interpret)
    Runner.run(r.bind([ids, pos, kvl, *caches], {"batch": B, "seq": S, "ctx": CTX}))
    got = r.returns[0].float()
    with torch.no_grad():
        ref = model(ids.long()).logits.float()
    rel = float((got - ref).norm() / ref.norm())
    d = Runner(module, weights, "decode", interpret)
    nxt = torch.randint(0, 256, (B, 1), device=device, dtype=torch.int32)
    Runner.run(d.bind([nxt, kvl[:, None].clone(), kvl + 1, *caches], {"batch": B, "seq": 1, "ctx": CTX}))
    with torch.no_grad():
        ref2 = model(torch.cat([ids, nxt], 1).long()).logits.float()[:, -1:]
    rel2 = float((d.returns[0].float() - ref2).norm() / ref2.norm())
    return {"prefill_rel_err": rel, "decode_rel_err": rel2, "dtype": dtype}


SHAPES = {
    "llama-3.2-1b": dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                         tie_word_embeddings=True, rope_theta=500000.0),
    "llama-3-8b": dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
                       rope_theta=500000.0),
}


def copy_bandwidth() -> float:
    x = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    ts = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y.copy_(x)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return 2 * x.numel() / statistics.median(ts)


def time_calls(fn, reps: int = 50) -> float:  # noqa: ANN001
    from inferx.autotune.runner import event_times

    return statistics.median(event_times(fn, 1, 5, reps))


def decode_speed(shape: str, bw: float, ctx_len: int = 512, batch: int = 1) -> dict:
    raw = dict(SHAPES[shape], model_type="llama", architectures=["LlamaForCausalLM"])
    cfg, module = build(raw, "bf16")
    g = torch.Generator(device="cuda").manual_seed(0)
    leaves = {}
    for op in module.walk():
        if isinstance(op, WeightOp):
            t = op.result.type
            assert isinstance(t, TensorType)
            name = op.attributes["name"].data
            if name not in leaves:
                leaves[name] = (torch.randn(tuple(t.shape), generator=g, device="cuda", dtype=torch.float32) * 0.02
                                ).to(torch.bfloat16)
    weights = GpuWeights(leaves)
    CTX = ctx_len + 64
    caches = [torch.randn(batch, cfg.num_kv_heads, CTX, cfg.head_dim, device="cuda", dtype=torch.bfloat16)
              for _ in range(2 * cfg.num_layers)]
    ids = torch.randint(0, cfg.vocab_size, (batch, 1), device="cuda", dtype=torch.int32)
    pos = torch.full((batch, 1), ctx_len, device="cuda", dtype=torch.int32)
    kvl = torch.full((batch,), ctx_len + 1, device="cuda", dtype=torch.int32)
    t0 = time.perf_counter()
    r = Runner(module, weights, "decode", interpret=False)
    calls = r.bind([ids, pos, kvl, *caches], {"batch": batch, "seq": 1, "ctx": CTX})
    Runner.run(calls)
    torch.cuda.synchronize()
    jit_s = time.perf_counter() - t0
    plain = time_calls(lambda: Runner.run(calls))
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        Runner.run(calls)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(graph):
        Runner.run(calls)
    replay = time_calls(graph.replay)
    # host time to launch the step with plain launches
    torch.cuda.synchronize()
    h0 = time.perf_counter()
    for _ in range(20):
        Runner.run(calls)
    host_ms = (time.perf_counter() - h0) / 20 * 1e3
    torch.cuda.synchronize()
    # per-kernel times
    per_kernel = [time_calls(lambda ln=ln: run([ln]), reps=20) for ln in calls]
    in_graph = _in_graph_by_position(r, calls, cfg.num_layers)
    weight_bytes = sum(t.numel() * t.element_size() for n, t in leaves.items() if n != "model.embed_tokens.weight")
    if cfg.names.lm_head is None:
        weight_bytes += leaves["model.embed_tokens.weight"].numel() * 2
    kv_bytes = 2 * cfg.num_layers * batch * cfg.num_kv_heads * (ctx_len + 1) * cfg.head_dim * 2
    roofline_ms = (weight_bytes + kv_bytes) / bw * 1e3
    return {"shape": shape, "batch": batch, "context": ctx_len, "launches": len(calls), "jit_s": jit_s,
            "plain_ms": plain, "graph_ms": replay, "host_launch_ms": host_ms, "roofline_ms": roofline_ms,
            "fraction_of_roofline": roofline_ms / replay, "bytes": weight_bytes + kv_bytes,
            "kernels_ms_by_template": _by_template(r, per_kernel), "in_graph_us_by_layer_position": in_graph}


def _in_graph_by_position(r: Runner, calls: list, layers: int) -> dict:
    """Each kernel position of a decoder layer timed inside a CUDA graph that launches it once per
    layer (each with its own weights, so L2 does not flatter): microseconds per launch."""
    per_layer = (len(calls) - 2) // layers  # the gather first, the final norm + lm_head last
    out = {}
    for pos in range(per_layer):
        group = [calls[1 + layer * per_layer + pos] for layer in range(layers)]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            run(group)
        tpl = r.sources[r.plan["launches"][1 + pos]["kernel"]][0].template
        out[f"{pos}:{tpl}"] = time_calls(graph.replay) * 1e3 / layers
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run(calls[-1:])
    out["head:gemm"] = time_calls(graph.replay) * 1e3
    return out


def _by_template(r: Runner, per_kernel: list[float]) -> dict:
    out: dict[str, float] = {}
    for step, ms in zip(r.plan["launches"], per_kernel, strict=True):
        tpl = r.sources[step["kernel"]][0].template
        out[tpl] = out.get(tpl, 0.0) + ms
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu_preview.json")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    result: dict = {"torch": torch.__version__}
    if args.device == "cpu":
        result["numerics"] = numerics("cpu", interpret=True)
        print(json.dumps(result, indent=1))
        return
    import triton

    result["triton"] = triton.__version__
    result["device"] = torch.cuda.get_device_name()
    result["numerics"] = numerics("cuda", interpret=False)
    print("numerics", result["numerics"], flush=True)
    bw = copy_bandwidth()
    result["copy_bytes_per_s"] = bw
    print(f"copy {bw / 1e12:.2f} TB/s", flush=True)
    result["decode"] = []
    for shape in ("llama-3.2-1b", "llama-3-8b"):
        res = decode_speed(shape, bw)
        result["decode"].append(res)
        print(json.dumps(res), flush=True)
        torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"{'shape':14s} {'plain ms':>9s} {'graph ms':>9s} {'roofline':>9s} {'fraction':>9s}")
    for r in result["decode"]:
        print(f"{r['shape']:14s} {r['plain_ms']:9.3f} {r['graph_ms']:9.3f} {r['roofline_ms']:9.3f} "
              f"{r['fraction_of_roofline']:9.2%}")


if __name__ == "__main__":
    main()
