"""The one decoder-LLM builder all families share: a ``DecoderConfig`` becomes an `ix` module with
the entry points ``prefill``, ``prefill_last`` and ``decode``.

All three have the same arguments, ``seq`` being symbolic in the prefills and 1 in decode:

    (input_ids[batch, seq] i32, positions[batch, seq] i32, kv_lens[batch] i32,
     k0, v0, ..., k{L-1}, v{L-1}: [batch, kv_heads, ctx, head_dim])
      -> (logits[batch, seq, vocab], k0', v0', ...)

``prefill_last`` returns logits[batch, 1, vocab], those of each sequence's last real token (the
last position that is not -1): the final norm and the LM head run over ``batch`` rows, which is
all that generation needs from a prompt.

``positions`` holds each token's absolute position (-1 for padding: its K/V are not written);
``kv_lens`` the number of valid cache entries per sequence after this step's writes. Both are
data, so one compiled step serves every decode position. The KV cache is threaded through as
values; sessions keep it as state, users never see it.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.ir import SSAValue

from inferx.compiler.ir import ops_nn as nn
from inferx.compiler.ir import ops_tensor as t
from inferx.compiler.ir.builder import FuncBuilder
from inferx.compiler.ir.ops_base import float_attr, int_attr, ints_attr
from inferx.compiler.ir.symbolic import Dim, sym
from inferx.compiler.ir.types import DType, TensorType
from inferx.models.config import DecoderConfig

BATCH, SEQ, CTX = sym("batch"), sym("seq"), sym("ctx")


def build_decoder_module(cfg: DecoderConfig) -> ModuleOp:
    """The module with ``@prefill`` and ``@prefill_last`` (seq symbolic) and ``@decode`` (seq = 1)."""
    return ModuleOp([_build_entry(cfg, "prefill", SEQ), _build_entry(cfg, "prefill_last", SEQ, last=True),
                     _build_entry(cfg, "decode", 1)])


def cache_type(cfg: DecoderConfig) -> TensorType:
    return TensorType([BATCH, cfg.num_kv_heads, CTX, cfg.head_dim], cfg.dtype)


def _build_entry(cfg: DecoderConfig, name: str, seq: Dim, last: bool = False):
    cache = cache_type(cfg)
    args = [
        ("input_ids", TensorType([BATCH, seq], DType.i32)),
        ("positions", TensorType([BATCH, seq], DType.i32)),
        ("kv_lens", TensorType([BATCH], DType.i32)),
    ]
    for i in range(cfg.num_layers):
        args += [(f"k{i}", cache), (f"v{i}", cache)]
    b = _Decoder(cfg, FuncBuilder(name, args), seq)
    logits, caches = b.forward(last)
    return b.fb.finish([logits, *caches])


class _Decoder:
    """Emits one entry point; each method is one piece of the decoder block."""

    def __init__(self, cfg: DecoderConfig, fb: FuncBuilder, seq: Dim):
        self.cfg, self.fb, self.seq = cfg, fb, seq
        self.dt = DType(cfg.dtype)
        self._weights: dict[str, SSAValue] = {}

    # helpers ------------------------------------------------------------------------------
    def weight(self, name: str, shape: list[int]) -> SSAValue:
        if name not in self._weights:
            self._weights[name] = self.fb.op(
                t.WeightOp, result_types=[TensorType(shape, self.dt)], name=StringAttr(name),
            )
        return self._weights[name]

    def linear(self, x: SSAValue, name: str, n: int, k: int, bias: bool) -> SSAValue:
        cfg = self.cfg
        shape = [n, k] if cfg.w_layout == "nk" else [k, n]
        w = self.weight(f"{name}.weight", shape)
        b = self.weight(f"{name}.bias", [n]) if bias else None
        return self.fb.op(nn.LinearOp, x, w, b,
                          w_layout=None if cfg.w_layout == "nk" else StringAttr("kn"))

    def norm(self, x: SSAValue, prefix: str) -> SSAValue:
        h, eps = self.cfg.hidden_size, float_attr(self.cfg.norm_eps)
        w = self.weight(f"{prefix}.weight", [h])
        if self.cfg.norm == "rms":
            return self.fb.op(nn.RMSNormOp, x, w, eps=eps)
        return self.fb.op(nn.LayerNormOp, x, w, self.weight(f"{prefix}.bias", [h]), eps=eps)

    def reshape(self, x: SSAValue, shape: list[Dim]) -> SSAValue:
        assert isinstance(x.type, TensorType)
        return self.fb.op(t.ReshapeOp, x, result_types=[x.type.with_shape(shape)])

    def heads(self, x: SSAValue, n: int) -> SSAValue:
        """[batch, seq, n*hd] -> [batch, n, seq, hd]."""
        x = self.reshape(x, [BATCH, self.seq, n, self.cfg.head_dim])
        return self.fb.op(t.TransposeOp, x, perm=ints_attr([0, 2, 1, 3]))

    def split(self, x: SSAValue, sizes: list[int]) -> list[SSAValue]:
        assert isinstance(x.type, TensorType)
        outs = [x.type.with_shape([*x.type.shape[:-1], s]) for s in sizes]
        return self.fb.ops(t.SplitOp, x, result_types=outs, dim=int_attr(-1))

    def act(self, x: SSAValue) -> SSAValue:
        if self.cfg.act == "silu":
            return self.fb.op(t.SiluOp, x)
        approx = "tanh" if self.cfg.act == "gelu_tanh" else None
        return self.fb.op(t.GeluOp, x, approximate=StringAttr(approx) if approx else None)

    # the model ----------------------------------------------------------------------------
    def forward(self, last: bool = False) -> tuple[SSAValue, list[SSAValue]]:
        cfg, fb, names = self.cfg, self.fb, self.cfg.names
        ids, pos = fb.arg("input_ids"), fb.arg("positions")
        embed = self.weight(names.embed, [cfg.vocab_size, cfg.hidden_size])
        h = fb.op(nn.EmbeddingOp, embed, ids, hint="h")
        if names.pos_embed:
            zero = fb.op(t.ConstantOp, result_types=[TensorType([], DType.i32)], value=int_attr(0))
            clamped = fb.op(t.MaxOp, pos, zero)  # padding positions (-1) read row 0
            wpe = self.weight(names.pos_embed, [cfg.max_position, cfg.hidden_size])
            h = fb.op(t.AddOp, h, fb.op(nn.EmbeddingOp, wpe, clamped))
        caches: list[SSAValue] = []
        for i in range(cfg.num_layers):
            h, k_cache, v_cache = self.layer(i, h)
            caches += [k_cache, v_cache]
        if last:
            h = fb.op(nn.LastTokenOp, h, pos, hint="h_last")
        h = self.norm(h, names.final_norm)
        head = names.lm_head or names.embed.removesuffix(".weight")
        if names.lm_head is None:  # tied: the embedding table is [vocab, hidden], an "nk" weight
            logits = fb.op(nn.LinearOp, h, embed, None)
        else:
            logits = fb.op(nn.LinearOp, h, self.weight(f"{head}.weight", [cfg.vocab_size, cfg.hidden_size]), None)
        return logits, caches

    def layer(self, i: int, h: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue]:
        cfg, fb, names = self.cfg, self.fb, self.cfg.names
        p = lambda name: name.format(i=i)  # noqa: E731
        hd, nq, nkv, hidden = cfg.head_dim, cfg.num_heads, cfg.num_kv_heads, cfg.hidden_size
        x = self.norm(h, p(names.input_norm))
        if names.qkv:
            qkv = self.linear(x, p(names.qkv), (nq + 2 * nkv) * hd, hidden, cfg.qkv_bias)
            q, k, v = self.split(qkv, [nq * hd, nkv * hd, nkv * hd])
        else:
            assert names.q and names.k and names.v
            q = self.linear(x, p(names.q), nq * hd, hidden, cfg.qkv_bias)
            k = self.linear(x, p(names.k), nkv * hd, hidden, cfg.qkv_bias)
            v = self.linear(x, p(names.v), nkv * hd, hidden, cfg.qkv_bias)
        q, k, v = self.heads(q, nq), self.heads(k, nkv), self.heads(v, nkv)
        pos = fb.arg("positions")
        if cfg.rope is not None:
            q, k = self.rope(q, pos), self.rope(k, pos)
        k_cache = fb.op(nn.KVWriteOp, fb.arg(f"k{i}"), k, pos, hint=f"k{i}_new")
        v_cache = fb.op(nn.KVWriteOp, fb.arg(f"v{i}"), v, pos, hint=f"v{i}_new")
        window = cfg.window(i)
        a = fb.op(nn.AttentionOp, q, k_cache, v_cache, pos, fb.arg("kv_lens"),
                  causal=UnitAttr(), scale=float_attr(hd**-0.5),
                  window=int_attr(window) if window else None)
        a = fb.op(t.TransposeOp, a, perm=ints_attr([0, 2, 1, 3]))
        a = self.reshape(a, [BATCH, self.seq, nq * hd])
        h = fb.op(t.AddOp, h, self.linear(a, p(names.o), hidden, nq * hd, cfg.o_bias))
        x = self.norm(h, p(names.post_norm))
        inter = cfg.intermediate_size
        if cfg.mlp == "gated":
            if names.gate_up:
                gate, up = self.split(self.linear(x, p(names.gate_up), 2 * inter, hidden, cfg.mlp_bias),
                                      [inter, inter])
            else:
                assert names.gate and names.up
                gate = self.linear(x, p(names.gate), inter, hidden, cfg.mlp_bias)
                up = self.linear(x, p(names.up), inter, hidden, cfg.mlp_bias)
            m = fb.op(t.MulOp, self.act(gate), up)
        else:
            assert names.up
            m = self.act(self.linear(x, p(names.up), inter, hidden, cfg.mlp_bias))
        h = fb.op(t.AddOp, h, self.linear(m, p(names.down), hidden, inter, cfg.mlp_bias), hint="h")
        return h, k_cache, v_cache

    def rope(self, x: SSAValue, pos: SSAValue) -> SSAValue:
        r = self.cfg.rope
        assert r is not None
        attrs: dict[str, object] = {"theta": float_attr(r.theta)}
        if r.style != "rotate_half":
            attrs["style"] = StringAttr(r.style)
        if r.rotary_dim and r.rotary_dim != self.cfg.head_dim:
            attrs["rotary_dim"] = int_attr(r.rotary_dim)
        if r.scaling != "none":
            attrs["scaling"] = StringAttr(r.scaling)
            attrs["factor"] = float_attr(r.factor)
        if r.scaling in ("dynamic", "llama3"):
            attrs["original_max_position"] = int_attr(r.original_max_position)
        if r.scaling == "llama3":
            attrs["low_freq_factor"] = float_attr(r.low_freq_factor)
            attrs["high_freq_factor"] = float_attr(r.high_freq_factor)
        return self.fb.op(nn.RopeOp, x, pos, **attrs)  # type: ignore[arg-type]
