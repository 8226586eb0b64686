"""Quantization-aware training, worked on CPU: a tiny Llama trained from scratch on CPython's
documentation text (bytes as tokens), then quantized to int4 by round-to-nearest, which costs it
perplexity on held-out text (the GNU GPL version 3); a few hundred steps of fine-tuning with
``inferx.compiler.quant.qat`` in the loop win most of it back. As a control, the float model
trained the same number of further steps without quantization in the loop, then quantized.

Perplexities are per byte on ``--eval-windows`` windows of ``--window`` bytes of the GPL, by the
model in torch (the prepared model computes what the compiled artifact does:
``tests/test_qat.py``); the QAT model's is also measured by the reference interpreter on the
program InferX compiles from it (``--check-windows`` windows). docs/qat.md's numbers come from:

    python benchmarks/qat_example.py --json benchmarks/results/qat_example_cpu_DATE.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import transformers as T

from inferx.compiler.quant import qat

EVAL_TEXT = Path("/usr/share/common-licenses/GPL-3")


def data(text: str, window: int) -> torch.Tensor:
    ids = torch.tensor(list(text.encode("utf-8")), dtype=torch.long)
    n = len(ids) // window
    return ids[: n * window].reshape(n, window)


def train(model: torch.nn.Module, windows: torch.Tensor, steps: int, lr: float, batch: int, seed: int) -> float:
    """``steps`` of AdamW on random batches of ``windows``, cosine-decayed learning rate; the last loss."""
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        ids = windows[torch.randint(len(windows), (batch,), generator=g)]
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model.eval()
    return float(loss.detach())


def perplexity(model: torch.nn.Module, windows: torch.Tensor) -> float:
    with torch.no_grad():
        losses = [float(model(w[None], labels=w[None]).loss) for w in windows]
    return math.exp(sum(losses) / len(losses))


def quantized(model: torch.nn.Module, scheme: str) -> torch.nn.Module:
    """A copy of ``model`` computing as its int4 artifact does (round-to-nearest)."""
    q = copy.deepcopy(model)
    qat.prepare(q, scheme)
    return q


def interpreter_perplexity(model: torch.nn.Module, scheme: str, windows: torch.Tensor) -> float:
    """The perplexity of the program InferX compiles from ``model`` with quant ``scheme``, by the
    reference interpreter."""
    import inferx
    from inferx.compiler.quant.store import quantize_program

    program = quantize_program(inferx.import_model(model, dtype="f32"), scheme)
    session = program.reference_session(max_batch=1, max_context=windows.shape[1])
    nll, n = 0.0, 0
    for w in windows.numpy():
        session.reset()
        logits = np.asarray(session.prefill(w[None]), dtype=np.float64)[0, :-1]
        logits -= logits.max(-1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        nll -= float(logp[np.arange(len(w) - 1), w[1:]].sum())
        n += len(w) - 1
    return math.exp(nll / n)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scheme", default="int4-g128-sym")
    p.add_argument("--steps", type=int, default=600, help="float pre-training steps")
    p.add_argument("--qat-steps", type=int, default=150)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--eval-windows", type=int, default=48)
    p.add_argument("--check-windows", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path)
    a = p.parse_args()
    import pydoc_data.topics

    torch.manual_seed(a.seed)
    text = "\n\n".join(pydoc_data.topics.topics[k] for k in sorted(pydoc_data.topics.topics))
    train_w = data(text, a.window)
    eval_w = data(EVAL_TEXT.read_text(), a.window)[: a.eval_windows]
    cfg = T.LlamaConfig(vocab_size=256, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=a.window,
                        tie_word_embeddings=False)
    model = T.LlamaForCausalLM(cfg)
    clock = time.perf_counter()
    loss = train(model, train_w, a.steps, 3e-3, a.batch, a.seed)
    rows = {"float": perplexity(model, eval_w), "rtn": perplexity(quantized(model, a.scheme), eval_w)}
    print(f"trained {a.steps} steps in {time.perf_counter() - clock:.0f} s (loss {loss:.3f}); held-out perplexity "
          f"float {rows['float']:.4f}, {a.scheme} RTN {rows['rtn']:.4f}", flush=True)
    control = copy.deepcopy(model)
    train(control, train_w, a.qat_steps, 3e-4, a.batch, a.seed + 1)
    rows["control_float"] = perplexity(control, eval_w)
    rows["control_rtn"] = perplexity(quantized(control, a.scheme), eval_w)
    clock = time.perf_counter()
    qat.prepare(model, a.scheme)
    train(model, train_w, a.qat_steps, 3e-4, a.batch, a.seed + 1)
    rows["qat"] = perplexity(model, eval_w)
    qat.finish(model)
    rows["qat_float_weights"] = perplexity(model, eval_w)
    print(f"QAT {a.qat_steps} steps in {time.perf_counter() - clock:.0f} s", flush=True)
    check = interpreter_perplexity(model, a.scheme, eval_w[: a.check_windows])
    torch_check = perplexity(quantized(model, a.scheme), eval_w[: a.check_windows])
    # against the control, which trained as many further steps without quantization in the loop
    lost, kept = rows["control_rtn"] - rows["control_float"], rows["qat"] - rows["control_float"]
    for k, v in rows.items():
        print(f"{k:20} {v:.4f}")
    print(f"after the same further training, RTN costs {lost:+.4f} over float; QAT's int4 model {kept:+.4f} "
          f"({1 - kept / lost:.0%} of RTN's cost recovered); the compiled program's perplexity on "
          f"{a.check_windows} windows {check:.4f} against the prepared model's {torch_check:.4f}")
    if a.json:
        a.json.write_text(json.dumps({
            "scheme": a.scheme, "steps": a.steps, "qat_steps": a.qat_steps, "window": a.window, "batch": a.batch,
            "train_text": "pydoc_data.topics (sorted topics), bytes", "eval_text": str(EVAL_TEXT),
            "eval_windows": len(eval_w), "model": cfg.to_dict() | {"parameters": sum(p.numel() for p in
                                                                                  model.parameters())},
            "perplexity": {k: round(v, 4) for k, v in rows.items()},
            "recovered": round(1 - kept / lost, 4),
            "check": {"windows": a.check_windows, "interpreter": round(check, 4), "torch": round(torch_check, 4)},
        }, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
