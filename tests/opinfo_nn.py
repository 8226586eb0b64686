"""Samples of the `ix` nn ops (embedding, last token, linear, matmul, softmax, norms, RoPE, attention, KV
writes) for the table in ``opinfo.py``, each with an independent PyTorch reference."""

from __future__ import annotations

import numpy as np
import torch
from opinfo import BS, EXACT, HIDDEN, Sample, T, rand, s, unit

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as ts
from inferx.compiler.ir.ops_base import float_attr, int_attr
from inferx.compiler.ir.types import DimAttr

F = torch.nn.functional


def embedding_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6000 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        vocab = [1, 7, 129, 50, 3, 9, 200, 2, 17, 31][i]
        idt = "i64" if i % 3 == 0 else "i32"
        table = rand(rng, (vocab, h), "f16" if i == 4 else "f32")
        ids = rng.integers(0, vocab, size=(bb, ss)).astype(np.int64 if idt == "i64" else np.int32)
        dt = "f16" if i == 4 else "f32"
        out.append(
            Sample(
                f"ix.embedding-{i}",
                6000 + i,
                [(T((vocab, h), dt), table), (T(("batch", "seq"), idt), ids)],
                lambda bld, args: [bld(nn.EmbeddingOp, args[0], args[1])],
                lambda t, ids: [F.embedding(ids.long(), t)],
                tol=EXACT,
            )
        )
    return out


def last_token_samples() -> list[Sample]:
    """Prompts padded on the right (-1 positions), rows with no real token (row 0 taken), and
    positions that do not start at 0 (a prompt appended to a cache)."""
    out = []
    for i in range(10):
        rng = np.random.default_rng(6050 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dt = {4: "f16", 7: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, ss, h), dt)
        n = rng.integers(0 if i % 4 == 0 else 1, ss + 1, size=bb)
        start = rng.integers(0, 50, size=bb) if i % 2 else np.zeros(bb, np.int64)
        pos = np.where(np.arange(ss)[None, :] < n[:, None], start[:, None] + np.arange(ss)[None, :], -1)
        pdt = "i32" if i % 3 else "i64"
        pos = pos.astype(np.int32 if pdt == "i32" else np.int64)

        def ref(x, pos):
            idx = [max([j for j in range(pos.shape[1]) if pos[b, j] >= 0], default=0) for b in range(x.shape[0])]
            return [torch.stack([x[b, j] for b, j in enumerate(idx)])[:, None]]

        out.append(
            Sample(
                f"ix.last_token-{i}-{dt}",
                6050 + i,
                [(T(("batch", "seq", h), dt), x), (T(("batch", "seq"), pdt), pos)],
                lambda bld, a: [bld(nn.LastTokenOp, a[0], a[1])],
                ref,
                tol=EXACT,
            )
        )
    return out


def linear_samples() -> list[Sample]:
    out = []
    for i in range(12):
        rng = np.random.default_rng(6100 + i)
        (bb, ss) = BS[i]
        k = [1, 7, 129, 16, 7, 33, 8, 129, 3, 64, 5, 12][i]
        n = [3, 129, 7, 1, 16, 8, 33, 5, 129, 2, 7, 9][i]
        layout = "kn" if i % 3 == 1 else "nk"
        has_bias = i % 2 == 0
        dt = {5: "f16", 9: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, ss, k), dt)
        w = rand(rng, (n, k) if layout == "nk" else (k, n), dt, scale=k**-0.5)
        bias = rand(rng, (n,), dt)
        weights = {"w": w, **({"b": bias} if has_bias else {})}

        def body(bld, args, w=w, bias=bias, dt=dt, layout=layout, has_bias=has_bias):
            wv = bld(ts.WeightOp, result_types=[T(w.shape, dt)], name=s("w"))
            bv = bld(ts.WeightOp, result_types=[T(bias.shape, dt)], name=s("b")) if has_bias else None
            return [bld(nn.LinearOp, args[0], wv, bv, w_layout=s(layout) if layout == "kn" else None)]

        def ref(x, w, b=None, layout=layout):
            return [F.linear(x, w if layout == "nk" else w.T, b)]

        out.append(
            Sample(
                f"ix.linear-{i}-{layout}-{'bias' if has_bias else 'nobias'}-{dt}",
                6100 + i,
                [(T(("batch", "seq", k), dt), x)],
                body,
                ref,
                weights=weights,
            )
        )
    return out


def qlinear_samples() -> list[Sample]:
    """int4 weights: codes (i4, the signed q - 8), group scales, optional mins, column scale and
    bias; the reference dequantizes in torch (an independent path) and calls F.linear."""
    out = []
    for i in range(12):
        rng = np.random.default_rng(6150 + i)
        (bb, ss) = BS[i]
        group = (32, 64, 128)[i % 3]
        k = group * (1, 2, 3, 1)[i % 4]
        n = [3, 129, 7, 1, 16, 8, 33, 5, 129, 2, 7, 9][i]
        has_mins, has_col, has_bias = i % 2 == 0, i % 4 == 3, i % 3 == 1
        dt = {5: "f16", 9: "bf16"}.get(i, "f32")
        sdt = "f32" if i % 5 == 4 else dt
        x = rand(rng, (bb, ss, k), dt)
        codes = rng.integers(-8, 8, (n, k)).astype(np.int8)
        scales = rand(rng, (n, k // group), sdt, scale=0.02 * k**-0.5, low=0.001 * k**-0.5)
        mins = rand(rng, (n, k // group), sdt, scale=0.1 * k**-0.5)
        col = rand(rng, (k,), dt, scale=0.5, low=0.5)
        bias = rand(rng, (n,), dt, scale=0.5)
        weights = {"c": codes, "s": scales, **({"m": mins} if has_mins else {}), **({"k": col} if has_col else {}),
                   **({"b": bias} if has_bias else {})}

        def body(bld, args, n=n, k=k, group=group, dt=dt, sdt=sdt, has_mins=has_mins, has_col=has_col,
                 has_bias=has_bias):
            cv = bld(ts.WeightOp, result_types=[T((n, k), "i4")], name=s("c"))
            sv = bld(ts.WeightOp, result_types=[T((n, k // group), sdt)], name=s("s"))
            mv = bld(ts.WeightOp, result_types=[T((n, k // group), sdt)], name=s("m")) if has_mins else None
            kv = bld(ts.WeightOp, result_types=[T((k,), dt)], name=s("k")) if has_col else None
            bv = bld(ts.WeightOp, result_types=[T((n,), dt)], name=s("b")) if has_bias else None
            return [bld(nn.QLinearOp, args[0], cv, sv, mv, kv, bv, None, group=int_attr(group))]

        def ref(x, c, sc, *rest, group=group, has_mins=has_mins, has_col=has_col, has_bias=has_bias):
            rest = list(rest)
            q = (c.to(torch.float32) + 8).reshape(c.shape[0], -1, group)
            w = q * sc[:, :, None] + rest.pop(0)[:, :, None] if has_mins else (q - 8) * sc[:, :, None]
            w = w.reshape(c.shape)
            if has_col:
                w = w * rest.pop(0)[None, :]
            return [F.linear(x, w, rest.pop(0) if has_bias else None)]

        out.append(
            Sample(
                f"ix.qlinear-{i}-g{group}-{'mins' if has_mins else 'sym'}{'-col' if has_col else ''}"
                f"{'-bias' if has_bias else ''}-{dt}-{sdt}",
                6150 + i,
                [(T(("batch", "seq", k), dt), x)],
                body,
                ref,
                weights=weights,
            )
        )
    return out


def matmul_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6200 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        n = [3, 7, 1, 129, 5, 2, 8, 4, 6, 9][i]
        a_spec, b_spec = [
            (("batch", 2, "seq", h), ("batch", 2, h, n)),
            (("batch", "seq", h), (h, n)),
            (("batch", 1, "seq", h), (1, 3, h, n)),
            (("seq", h), (h, "seq")),
            (("batch", "seq", h), ("batch", h, n)),
        ][i % 5]
        env = {"batch": bb, "seq": ss}
        dt = "f16" if i == 6 else "f32"
        a = rand(rng, [env.get(d, d) if isinstance(d, str) else d for d in a_spec], dt)
        b = rand(rng, [env.get(d, d) if isinstance(d, str) else d for d in b_spec], dt)
        out.append(
            Sample(
                f"ix.matmul-{i}",
                6200 + i,
                [(T(a_spec, dt), a), (T(b_spec, dt), b)],
                lambda bld, args: [bld(nn.MatmulOp, args[0], args[1])],
                lambda a, b: [torch.matmul(a, b)],
            )
        )
    return out


def softmax_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6300 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        dim = [-1, 1, 0, 2, -1, -2, 2, 1, -1, 0][i]
        dt = {3: "f16", 7: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, ss, h), dt, scale=4.0)
        out.append(
            Sample(
                f"ix.softmax-{i}-dim{dim}-{dt}",
                6300 + i,
                [(T(("batch", "seq", h), dt), x)],
                lambda bld, args, dim=dim: [bld(nn.SoftmaxOp, args[0], dim=int_attr(dim))],
                lambda x, dim=dim: [torch.softmax(x, dim=dim)],
            )
        )
    return out


def _rms_case(i: int, seed: int) -> tuple:  # type: ignore[type-arg]
    """Case ``i`` of the RMSNorm samples: batch, seq, hidden, eps, dtype, x, weight."""
    rng = np.random.default_rng(seed + i)
    (bb, ss), h = BS[i], HIDDEN[i]
    eps = [1e-6, 1e-5, 1e-6, 0.1, 1e-6, 1e-5, 1e-6, 1e-6, 1e-3, 1e-6][i]
    dt = {2: "f16", 6: "bf16"}.get(i, "f32")
    return bb, ss, h, eps, dt, rand(rng, (bb, ss, h), dt, scale=2.0), rand(rng, (h,), dt)


def rmsnorm_samples() -> list[Sample]:
    out = []
    for i in range(10):
        bb, ss, h, eps, dt, x, w = _rms_case(i, 6400)
        out.append(
            Sample(
                f"ix.rmsnorm-{i}-{dt}",
                6400 + i,
                [(T(("batch", "seq", h), dt), x), (T((h,), dt), w)],
                lambda bld, args, eps=eps: [bld(nn.RMSNormOp, args[0], args[1], eps=float_attr(eps))],
                lambda x, w, eps=eps: [F.rms_norm(x, (x.shape[-1],), w, eps)],
            )
        )
    return out


def sum_squares_samples() -> list[Sample]:
    out = []
    for i in range(10):
        _, _, h, _, dt, x, _ = _rms_case(i, 6450)  # the RMSNorm samples' inputs, drawn from other seeds
        out.append(
            Sample(
                f"ix.sum_squares-{i}-{dt}",
                6450 + i,
                [(T(("batch", "seq", h), dt), x)],
                lambda bld, args: [bld(nn.SumSquaresOp, args[0])],
                lambda x: [x.double().square().sum(-1).float()],
            )
        )
    return out


def rmsnorm_ss_samples() -> list[Sample]:
    """RMSNorm with statistics given: those of x (as an ``ix.sum_squares`` of it would give)."""
    out = []
    for i in range(10):
        bb, ss, h, eps, dt, x, w = _rms_case(i, 6470)
        sq = np.square(np.asarray(x, dtype=np.float64)).sum(-1).astype(np.float32)
        out.append(
            Sample(
                f"ix.rmsnorm_ss-{i}-{dt}",
                6470 + i,
                [(T(("batch", "seq", h), dt), x), (T((h,), dt), w), (T(("batch", "seq"), "f32"), sq)],
                lambda bld, args, eps=eps: [bld(nn.RMSNormSumSquaresOp, args[0], args[1], args[2],
                                                eps=float_attr(eps))],
                lambda x, w, sq, eps=eps: [F.rms_norm(x, (x.shape[-1],), w, eps)],
            )
        )
    return out


def layernorm_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6500 + i)
        (bb, ss), h = BS[i], HIDDEN[i]
        h = max(h, 2)
        has_w, has_b = i % 4 in (0, 1), i % 4 in (0, 2)
        dt = "f16" if i == 5 else "f32"
        x = rand(rng, (bb, ss, h), dt, scale=2.0)
        args = [(T(("batch", "seq", h), dt), x)]
        if has_w:
            args.append((T((h,), dt), rand(rng, (h,), dt)))
        if has_b:
            args.append((T((h,), dt), rand(rng, (h,), dt)))

        def body(bld, a, has_w=has_w, has_b=has_b):
            w = a[1] if has_w else None
            b = a[1 + has_w] if has_b else None
            return [bld(nn.LayerNormOp, a[0], w, b, eps=float_attr(1e-5))]

        def ref(x, *p, has_w=has_w, has_b=has_b):
            w = p[0] if has_w else None
            b = p[int(has_w)] if has_b else None
            return [F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)]

        out.append(
            Sample(
                f"ix.layernorm-{i}-{'w' if has_w else ''}{'b' if has_b else ''}", 6500 + i, args, body, ref
            )
        )
    return out


def _ref_inv_freq(rot: int, theta: float, scaling: str, p: dict, max_pos: int) -> torch.Tensor:
    """HF transformers' rope init functions (default, linear, dynamic, llama3), in float64."""
    ar = torch.arange(0, rot, 2, dtype=torch.int64).double() / rot
    if scaling == "dynamic":
        orig, factor = p["original_max_position"], p["factor"]
        seq_len = max(max_pos + 1, orig)
        theta = theta * ((factor * seq_len / orig) - (factor - 1)) ** (rot / (rot - 2))
    inv = 1.0 / (theta**ar)
    if scaling == "linear":
        inv = inv / p["factor"]
    if scaling == "llama3":
        factor, low, high, old = (
            p["factor"],
            p["low_freq_factor"],
            p["high_freq_factor"],
            p["original_max_position"],
        )
        wavelen = 2 * torch.pi / inv
        llama = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * llama / factor + smooth * llama
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        inv = torch.where(medium, smoothed, llama)
    return inv


def rope_samples() -> list[Sample]:
    out = []
    configs = [
        ("rotate_half", "none", {}),
        ("interleaved", "none", {}),
        ("rotate_half", "linear", {"factor": 4.0}),
        ("rotate_half", "dynamic", {"factor": 2.0, "original_max_position": 16}),
        (
            "rotate_half",
            "llama3",
            {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position": 64},
        ),
        ("interleaved", "linear", {"factor": 2.0}),
        ("rotate_half", "none", {}),
        ("interleaved", "dynamic", {"factor": 3.0, "original_max_position": 500}),
        (
            "interleaved",
            "llama3",
            {"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 2.0, "original_max_position": 32},
        ),
        ("rotate_half", "dynamic", {"factor": 2.0, "original_max_position": 4}),
        ("rotate_half", "none", {}),
    ]
    for i, (style, scaling, p) in enumerate(configs):
        rng = np.random.default_rng(6600 + i)
        (bb, ss) = BS[i]
        d = [16, 8, 32, 16, 64, 8, 6, 16, 32, 4, 2][i]
        rot = [d, d, d // 2, d, d, 4, 2, 8, d, d, 2][i]
        theta = [10000.0, 10000.0, 500000.0, 10000.0, 500000.0, 100.0, 10000.0, 1e6, 10000.0, 1000.0, 10.0][i]
        dt = {6: "f16", 10: "bf16"}.get(i, "f32")
        x = rand(rng, (bb, 3, ss, d), dt)
        pos = rng.integers(0, 200, size=(bb, ss)).astype(np.int32 if i % 2 else np.int64)
        pdt = "i32" if i % 2 else "i64"
        attrs = {
            "theta": float_attr(theta),
            "style": s(style) if style != "rotate_half" else None,
            "rotary_dim": int_attr(rot) if rot != d or i == 0 else None,
            "scaling": s(scaling) if scaling != "none" else None,
        }
        for key, v in p.items():
            attrs[key] = int_attr(v) if isinstance(v, int) else float_attr(v)

        def ref(x, pos, rot=rot, theta=theta, scaling=scaling, p=p, style=style):
            x = x.double()
            inv = _ref_inv_freq(rot, theta, scaling, p, int(pos.max()))
            ang = pos.double()[:, None, :, None] * inv  # [b, 1, s, rot/2]
            xr, rest = x[..., :rot], x[..., rot:]
            if style == "rotate_half":
                emb = torch.cat([ang, ang], dim=-1)
                x1, x2 = xr[..., : rot // 2], xr[..., rot // 2 :]
                y = xr * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()
            else:
                c = torch.view_as_complex(xr.reshape(*xr.shape[:-1], rot // 2, 2).contiguous())
                y = torch.view_as_real(c * torch.polar(torch.ones_like(ang), ang)).flatten(-2)
            return [torch.cat([y, rest], dim=-1).float()]

        out.append(
            Sample(
                f"ix.rope-{i}-{style}-{scaling}-rot{rot}",
                6600 + i,
                [(T(("batch", 3, "seq", d), dt), x), (T(("batch", "seq"), pdt), pos)],
                lambda bld, args, attrs=attrs: [bld(nn.RopeOp, args[0], args[1], **attrs)],
                ref,
            )
        )
    return out


def attention_samples() -> list[Sample]:
    out = []
    # (hq, hkv, s, t, d, dv, causal, window, softcap, scale, positions?, kv_lens?)
    cases = [
        (4, 4, "s", "s", 16, 16, True, None, None, None, False, False),
        (4, 2, "s", "s", 8, 8, True, None, None, None, False, False),
        (8, 1, 1, "ctx", 16, 16, True, None, None, None, True, True),
        (2, 2, "s", "s", 8, 4, False, None, None, None, False, False),
        (4, 2, "s", "s", 16, 16, True, 3, None, None, False, False),
        (4, 4, "s", "s", 8, 8, True, None, 5.0, None, False, False),
        (6, 3, "s", "ctx", 8, 8, True, None, None, 0.3, True, True),
        (2, 1, "s", "s", 4, 4, True, 2, 2.0, None, True, False),
        (4, 4, 2, "ctx", 8, 8, False, None, None, None, False, True),
        (3, 1, "s", "ctx", 7, 5, True, 4, None, None, True, True),
        (2, 2, "s", "s", 8, 8, True, None, None, None, True, False),  # a padded query sees nothing
        (4, 2, "s", "s", 8, 8, True, None, None, None, False, False),
    ]
    for i, (hq, hkv, s_, t_, d, dv, causal, window, cap, scale, has_pos, has_lens) in enumerate(cases):
        rng = np.random.default_rng(6700 + i)
        (bb, ss) = BS[i]
        ss = min(ss, 33)
        sv = ss if s_ == "s" else s_
        tv = sv if t_ == "s" else sv + int(rng.integers(0, 9))
        dt = {11: "f16", 3: "bf16"}.get(i, "f32")
        sspec = "seq" if s_ == "s" else s_
        tspec = "seq" if t_ == "s" else "ctx"
        q = rand(rng, (bb, hq, sv, d), dt)
        k = rand(rng, (bb, hkv, tv, d), dt)
        v = rand(rng, (bb, hkv, tv, dv), dt)
        kv_lens = rng.integers(max(tv - 3, 1), tv + 1, size=(bb,)).astype(np.int32)
        positions = (kv_lens[:, None] - sv + np.arange(sv)[None, :]).astype(np.int32)
        if i == 10:
            positions[:, 0] = -1  # padding: no key is at or before position -1
        args = [
            (T(("batch", hq, sspec, d), dt), q),
            (T(("batch", hkv, tspec, d), dt), k),
            (T(("batch", hkv, tspec, dv), dt), v),
        ]
        if has_pos:
            args.append((T(("batch", sspec), "i32"), positions))
        if has_lens:
            args.append((T(("batch",), "i32"), kv_lens))
        attrs = {
            "causal": unit() if causal else None,
            "window": int_attr(window) if window else None,
            "softcap": float_attr(cap) if cap else None,
            "scale": float_attr(scale) if scale else None,
        }

        def body(bld, a, has_pos=has_pos, has_lens=has_lens, attrs=attrs):
            pos = a[3] if has_pos else None
            lens = a[3 + has_pos] if has_lens else None
            return [bld(nn.AttentionOp, a[0], a[1], a[2], pos, lens, **attrs)]

        def ref(
            q,
            k,
            v,
            *extra,
            has_pos=has_pos,
            has_lens=has_lens,
            causal=causal,
            window=window,
            cap=cap,
            scale=scale,
        ):
            b, hq, s, d = q.shape
            t = k.shape[2]
            pos = extra[0].long() if has_pos else (torch.arange(s) + t - s).expand(b, s)
            lens = extra[int(has_pos)].long() if has_lens else torch.full((b,), t)
            j = torch.arange(t)
            mask = (j[None, None, :] < lens[:, None, None]).expand(b, s, t)
            if causal:
                mask = mask & (j[None, None, :] <= pos[:, :, None])
            if window:
                mask = mask & (pos[:, :, None] - j[None, None, :] < window)
            mask = mask[:, None]
            rep = hq // k.shape[1]
            k, v = k.double().repeat_interleave(rep, dim=1), v.double().repeat_interleave(rep, dim=1)
            q = q.double()
            sc = scale if scale else d**-0.5
            if cap:
                logits = cap * torch.tanh(q @ k.transpose(-1, -2) * sc / cap)
                o = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=-1) @ v
            else:
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=sc)
            return [torch.where(mask.any(-1, keepdim=True), o, 0.0).float()]

        out.append(
            Sample(
                f"ix.attention-{i}-hq{hq}-hkv{hkv}{'-causal' if causal else ''}"
                f"{f'-w{window}' if window else ''}{'-cap' if cap else ''}-{dt}",
                6700 + i,
                args,
                body,
                ref,
            )
        )
    return out


def kv_write_samples() -> list[Sample]:
    out = []
    for i in range(10):
        rng = np.random.default_rng(6800 + i)
        (bb, ss) = BS[i]
        ss = min(ss, 33)
        hkv, d = [1, 2, 4, 1, 3, 2, 1, 2, 8, 1][i], [8, 16, 4, 7, 8, 2, 16, 8, 4, 129][i]
        cap = ss + int(rng.integers(0, 6))
        dt = {4: "f16", 7: "bf16"}.get(i, "f32")
        cache, new = rand(rng, (bb, hkv, cap, d), dt), rand(rng, (bb, hkv, ss, d), dt)
        pos = np.stack([rng.permutation(cap)[:ss] for _ in range(bb)]).astype(np.int32 if i % 2 else np.int64)
        if i % 3 == 0:
            pos[rng.random(pos.shape) < 0.3] = -1  # padding tokens are skipped
        pdt = "i32" if i % 2 else "i64"

        def ref(cache, new, pos):
            out = cache.clone()
            for n in range(pos.shape[0]):
                for j in range(pos.shape[1]):
                    if pos[n, j] >= 0:
                        out[n, :, pos[n, j]] = new[n, :, j]
            return [out]

        out.append(
            Sample(
                f"ix.kv_write-{i}-{dt}",
                6800 + i,
                [
                    (T(("batch", hkv, cap, d), dt), cache),
                    (T(("batch", hkv, "seq", d), dt), new),
                    (T(("batch", "seq"), pdt), pos),
                ],
                lambda bld, a: [bld(nn.KVWriteOp, a[0], a[1], a[2])],
                ref,
                tol=EXACT,
            )
        )
    return out


def dequantize_samples() -> list[Sample]:
    """An int4 weight dequantized with its optional minimums, column scale and norm weight into
    the start of a 1-D buffer (``into``, a function argument here, or zeros); the reference
    dequantizes in torch and rounds to the buffer's dtype."""
    out = []
    for i in range(10):
        rng = np.random.default_rng(6170 + i)
        group = (32, 64, 128)[i % 3]
        k = group * (1, 2)[i % 2]
        n = [3, 16, 7, 1, 9, 5, 33, 2, 12, 4][i]
        has_mins, has_col, has_g, has_into = i % 2 == 0, i % 3 == 1, i != 3, i % 2 == 1
        dt = ("f32", "f16", "bf16")[i % 3]
        size = n * k + (0, 5)[i % 2]
        codes = rng.integers(-8, 8, (n, k)).astype(np.int8)
        scales = rand(rng, (n, k // group), dt, scale=0.02, low=0.001)
        mins = rand(rng, (n, k // group), dt, scale=0.1)
        col = rand(rng, (k,), dt, scale=0.5, low=0.5)
        g = rand(rng, (k,), dt, scale=0.5, low=0.5)
        weights = {"c": codes, "s": scales, **({"m": mins} if has_mins else {}), **({"k": col} if has_col else {}),
                   **({"g": g} if has_g else {})}
        args = [(T((size,), dt), rand(rng, (size,), dt))] if has_into else []

        def body(bld, args, n=n, k=k, group=group, dt=dt, size=size, has_mins=has_mins, has_col=has_col,
                 has_g=has_g):
            cv = bld(ts.WeightOp, result_types=[T((n, k), "i4")], name=s("c"))
            sv = bld(ts.WeightOp, result_types=[T((n, k // group), dt)], name=s("s"))
            mv = bld(ts.WeightOp, result_types=[T((n, k // group), dt)], name=s("m")) if has_mins else None
            kv = bld(ts.WeightOp, result_types=[T((k,), dt)], name=s("k")) if has_col else None
            gv = bld(ts.WeightOp, result_types=[T((k,), dt)], name=s("g")) if has_g else None
            into = args[0] if args else None
            return [bld(nn.DequantizeOp, cv, sv, mv, kv, gv, into, result_types=[T((size,), dt)],
                        group=int_attr(group), min_rows=int_attr(1), rows=DimAttr("seq"))]

        def ref(*ts_, n=n, k=k, group=group, dt=dt, size=size, has_mins=has_mins, has_col=has_col, has_g=has_g,
                has_into=has_into):
            rest = list(ts_)
            into = rest.pop(0) if has_into else torch.zeros(size)
            c, sc = rest.pop(0), rest.pop(0)
            q = (c.to(torch.float32) + 8).reshape(n, -1, group)
            w = q * sc[:, :, None] + rest.pop(0)[:, :, None] if has_mins else (q - 8) * sc[:, :, None]
            w = w.reshape(n, k)
            if has_col:
                w = w * rest.pop(0)[None, :]
            if has_g:
                w = w * rest.pop(0)[None, :]
            y = into.to(torch.float32).clone()
            y[: n * k] = w.reshape(-1)
            return [y.to({"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt])]

        out.append(Sample(f"ix.dequantize-{i}-g{group}-{dt}{'-into' if has_into else ''}", 6170 + i, args, body,
                          ref, weights=weights))
    return out


def fp8_linear_samples() -> list[Sample]:
    """FP8 W8A8: E4M3 codes (random values rounded by torch's own float8_e4m3fn cast), one scale
    per output channel, x quantized per token (or, in samples 3 and 6, by a static ``x_scale``
    that some values exceed: they saturate); the reference quantizes x in torch (its E4M3 cast
    after the clamp: an independent rounding) and multiplies in fp32."""
    out = []
    for i in range(10):
        rng = np.random.default_rng(7150 + i)
        (bb, ss) = BS[i]
        k = (16, 64, 96, 32, 128, 48, 256, 8, 64, 160)[i]
        n = (3, 17, 1, 64, 5, 9, 130, 2, 33, 7)[i]
        dt = ("f32", "bf16", "f32", "f16", "bf16", "f32", "bf16", "f16", "f32", "bf16")[i]
        has_bias, static = i % 2 == 1, i in (3, 6)
        x = rand(rng, (bb, ss, k), dt)
        if i == 2:
            x[..., :] = 0  # a row of zeros: scale 1, products 0
        codes = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32) * 100).clamp(-448, 448)
        codes = codes.to(torch.float8_e4m3fn).float().numpy()
        scales = rand(rng, (n,), "f32", scale=0.01 * k**-0.5, low=0.001)
        bias = rand(rng, (n,), dt, scale=0.5)
        x_scale = np.array([np.quantile(np.abs(np.asarray(x, dtype=np.float32)), 0.95) / 448], dtype=np.float32)
        weights = {"c": codes, "s": scales, **({"b": bias} if has_bias else {}), **({"xs": x_scale} if static else {})}

        def body(bld, args, n=n, k=k, dt=dt, has_bias=has_bias, static=static):
            cv = bld(ts.WeightOp, result_types=[T((n, k), "f8e4m3")], name=s("c"))
            sv = bld(ts.WeightOp, result_types=[T((n,), "f32")], name=s("s"))
            bv = bld(ts.WeightOp, result_types=[T((n,), dt)], name=s("b")) if has_bias else None
            xs = bld(ts.WeightOp, result_types=[T((1,), "f32")], name=s("xs")) if static else None
            return [bld(nn.Fp8LinearOp, args[0], cv, sv, bv, xs)]

        def ref(x, c, sc, *rest, has_bias=has_bias, static=static):
            x = x.float()
            if static:
                sx = rest[-1].float().reshape(1)
            else:
                amax = x.abs().amax(-1, keepdim=True)
                sx = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
            xq = (x / sx).clamp(-448, 448).to(torch.float8_e4m3fn).float()
            y = (xq @ c.float().T) * sx * sc[None, :]
            return [y + rest[0] if has_bias else y]

        out.append(Sample(f"ix.fp8_linear-{i}-{dt}{'-bias' if has_bias else ''}{'-static' if static else ''}", 7150 + i,
                          [(T(("batch", "seq", k), dt), x)], body, ref, weights=weights))
    return out


def fp8_quantize_samples() -> list[Sample]:
    """x's rows to E4M3 with a scale each (their largest magnitude over 448, 1 for a row of zeros),
    or with a static ``x_scale`` (samples 3 and 6) that some values exceed: they saturate. The
    reference quantizes in torch (its own float8_e4m3fn cast after the clamp)."""
    out = []
    for i in range(10):
        rng = np.random.default_rng(7250 + i)
        (bb, ss) = BS[i]
        k = (16, 64, 96, 32, 128, 48, 256, 8, 64, 160)[i]
        dt = ("f32", "bf16", "f32", "f16", "bf16", "f32", "bf16", "f16", "f32", "bf16")[i]
        static = i in (3, 6)
        x = rand(rng, (bb, ss, k), dt, scale=(0.01, 1.0, 30.0)[i % 3])
        if i == 2:
            x[..., :] = 0  # rows of zeros: scale 1, codes 0
        x_scale = np.array([np.quantile(np.abs(np.asarray(x, dtype=np.float32)), 0.9) / 448], dtype=np.float32)
        weights = {"xs": x_scale} if static else {}

        def body(bld, args, static=static):
            xs = bld(ts.WeightOp, result_types=[T((1,), "f32")], name=s("xs")) if static else None
            return bld(nn.Fp8QuantizeOp, args[0], xs)

        def ref(x, *rest, static=static):
            x = x.float()
            if static:
                sx = rest[-1].float().reshape(1, 1, 1).expand(*x.shape[:-1], 1)
            else:
                amax = x.abs().amax(-1, keepdim=True)
                sx = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
            return [(x / sx).clamp(-448, 448).to(torch.float8_e4m3fn).float(), sx[..., 0].contiguous()]

        out.append(Sample(f"ix.fp8_quantize-{i}-{dt}{'-static' if static else ''}", 7250 + i,
                          [(T(("batch", "seq", k), dt), x)], body, ref, weights=weights))
    return out
