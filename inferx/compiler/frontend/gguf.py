"""Importing GGUF files (llama.cpp's format) of the ``llama`` architecture.

Importing reads the header only (metadata and tensor table, with struct from a memory map) and
checks that every tensor's bytes lie inside the file, so a truncated or corrupt file is refused
at once, naming the file. Weights are memory-mapped and dequantized on access by
``gguf.quants.dequantize`` (Q4_0, Q4_1, Q8_0, K-quants, F16, BF16, ...) into float32. The
``gguf`` package's own ``GGUFReader`` is not used for the header: it builds a numpy view per
vocabulary string and takes about 4 s on a 49k-token vocabulary, against tens of ms here.

Weight names are the GGUF tensor names (``blk.{i}.attn_q.weight``), so no renaming table is
needed. GGUF dims are listed fastest first; numpy shapes are their reverse, which gives HF's
[out, in] layout.

Rotary embedding: llama.cpp's converter permutes each head's rows of ``attn_q`` and ``attn_k`` so
that HF's rotary pairs (j, j + d/2) sit at (2j, 2j + 1), the interleaved (GPT-J) layout its
kernels rotate. The program keeps those rows and rotates interleaved pairs instead of undoing
the permutation: q and k of a head are permuted alike, so every q.k, and hence the logits,
equal HF's rotate_half on the original weights.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inferx.compiler.frontend.hf import decoder_program, with_dtype
from inferx.compiler.frontend.tokenizer import LazyTokenizer, has_transformers
from inferx.compiler.frontend.weights import WeightError
from inferx.models.config import LIMITS, MAX_TOKEN_ID, ConfigError, DecoderConfig, RopeConfig, WeightNames
from inferx.program import Program

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_ALIGNMENT = 1 << 20
MAX_DIM = 1 << 40  # a tensor dim (GGUF stores u64): far above any weight, no numpy overflow

GGUF_LLAMA_NAMES = WeightNames(
    embed="token_embd.weight",
    final_norm="output_norm",
    lm_head="output",
    input_norm="blk.{i}.attn_norm",
    post_norm="blk.{i}.ffn_norm",
    q="blk.{i}.attn_q",
    k="blk.{i}.attn_k",
    v="blk.{i}.attn_v",
    o="blk.{i}.attn_output",
    gate="blk.{i}.ffn_gate",
    up="blk.{i}.ffn_up",
    down="blk.{i}.ffn_down",
)


def import_gguf(path: str | Path, *, dtype: str | None = None) -> Program:
    """A Program over a llama GGUF file; ``tokenizer`` is attached (built on first use) when
    the file carries a vocabulary and ``transformers`` is installed."""
    path = Path(path)
    header = read_gguf(path)
    cfg = with_dtype(llama_config(header), dtype)
    program = decoder_program(cfg, GGUFStore(header), str(path))
    if "tokenizer.ggml.tokens" in header.metadata and has_transformers():
        program.tokenizer = LazyTokenizer(path, gguf=True)
    return program


# -- the file -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GGUFTensor:
    name: str
    qtype: int  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]  # numpy order (GGUF dims reversed)
    offset: int  # absolute byte offset in the file
    nbytes: int


@dataclass(frozen=True)
class GGUFHeader:
    path: Path
    version: int
    metadata: dict[str, Any]  # string arrays longer than _KEEP_STRINGS hold their length only
    tensors: dict[str, GGUFTensor]


@dataclass(frozen=True)
class StringArray:
    """A long string array (a vocabulary, merges) that the importer does not decode."""

    length: int

    def __len__(self) -> int:
        return self.length


_KEEP_STRINGS = 256
# GGUF value types: id -> struct format (8 string, 9 array are variable-sized)
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_NUMPY = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8",
          11: "<i8", 12: "<f8"}


class _Cursor:
    """Little-endian reads from a buffer; reading past its end is a truncation error."""

    def __init__(self, buf: mmap.mmap, path: Path):
        self.buf, self.path, self.pos, self.size = buf, path, 0, len(buf)

    def fail(self, what: str) -> WeightError:
        return WeightError(f"{self.path}: truncated or corrupt GGUF file: {what} (at byte {self.pos} "
                           f"of {self.size})")

    def take(self, n: int, what: str) -> int:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"{what} runs past the end of the file")
        start, self.pos = self.pos, self.pos + n
        return start

    def scalar(self, fmt: str, what: str) -> Any:
        start = self.take(struct.calcsize(fmt), what)
        return struct.unpack_from("<" + fmt, self.buf, start)[0]

    def string(self, what: str) -> str:
        n = self.scalar("Q", what)
        start = self.take(n, what)
        try:
            return self.buf[start:start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8") from None

    def skip_strings(self, count: int, what: str) -> None:
        buf, pos, size = self.buf, self.pos, self.size
        for _ in range(count):
            if pos + 8 > size:
                break
            pos += 8 + struct.unpack_from("<Q", buf, pos)[0]
        else:
            if pos <= size:
                self.pos = pos
                return
        raise self.fail(f"{what} runs past the end of the file")

    def value(self, vtype: int, what: str) -> Any:
        if vtype in _SCALARS:
            return self.scalar(_SCALARS[vtype], what)
        if vtype == 8:
            return self.string(what)
        if vtype != 9:
            raise self.fail(f"{what} has unknown value type {vtype}")
        itype, count = self.scalar("I", what), self.scalar("Q", what)
        if itype in _NUMPY:
            dt = np.dtype(_NUMPY[itype])
            start = self.take(count * dt.itemsize, what)
            return np.frombuffer(self.buf, dtype=dt, count=count, offset=start).copy()
        if itype == 8:
            if count <= _KEEP_STRINGS:
                return [self.string(what) for _ in range(count)]
            self.skip_strings(count, what)
            return StringArray(count)
        raise self.fail(f"{what} is an array of unsupported type {itype}")


def read_gguf(path: Path) -> GGUFHeader:
    """The metadata and tensor table of a GGUF file (v2 or v3, little-endian); every tensor's
    extent is checked against the file size. Errors name the file (and the tensor)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    size = path.stat().st_size
    if size < 24:
        raise WeightError(f"{path}: not a GGUF file ({size} bytes)")
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != GGUF_MAGIC:
            raise WeightError(f"{path}: not a GGUF file (magic {bytes(buf[:4])!r}, expected b'GGUF')")
        c = _Cursor(buf, path)
        c.pos = 4
        version = c.scalar("I", "version")
        if version not in (2, 3):
            hint = " (a big-endian file?)" if version & 0xFFFF == 0 else ""
            raise WeightError(f"{path}: GGUF version {version} is not supported (2, 3){hint}")
        n_tensors, n_kv = c.scalar("Q", "tensor count"), c.scalar("Q", "metadata count")
        if n_tensors > size // 24 or n_kv > size // 12:
            raise c.fail(f"{n_tensors} tensors and {n_kv} metadata entries cannot fit")
        metadata: dict[str, Any] = {}
        for i in range(n_kv):
            key = c.string(f"metadata key {i}")
            metadata[key] = c.value(c.scalar("I", f"type of '{key}'"), f"value of '{key}'")
        infos = []
        for i in range(n_tensors):
            name = c.string(f"tensor name {i}")
            n_dims = c.scalar("I", f"rank of '{name}'")
            if n_dims > 8:
                raise c.fail(f"tensor '{name}' has rank {n_dims}")
            dims = [c.scalar("Q", f"dims of '{name}'") for _ in range(n_dims)]
            if any(d > MAX_DIM for d in dims):
                raise c.fail(f"tensor '{name}' has dims {dims}, over {MAX_DIM}")
            qtype, offset = c.scalar("I", f"type of '{name}'"), c.scalar("Q", f"offset of '{name}'")
            infos.append((name, dims, qtype, offset))
        align = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
        if not _is_int(align) or align <= 0 or align & (align - 1) or align > MAX_ALIGNMENT:
            raise WeightError(f"{path}: general.alignment {align!r} is not a power of two up to {MAX_ALIGNMENT}")
        data_start = -(-c.pos // align) * align
    tensors: dict[str, GGUFTensor] = {}
    for name, dims, qtype, offset in infos:
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
        except (ValueError, KeyError):
            raise WeightError(f"{path}: tensor '{name}' has unknown GGML type {qtype}") from None
        count = math.prod(dims)
        if dims and dims[0] % block:
            raise WeightError(f"{path}: tensor '{name}' has {dims[0]} columns, not a multiple of "
                              f"its {GGMLQuantizationType(qtype).name} block of {block}")
        nbytes = count // block * type_size
        begin = data_start + offset
        if begin + nbytes > size:
            raise WeightError(f"{path}: truncated GGUF file: tensor '{name}' ends at byte "
                              f"{begin + nbytes} but the file has {size}")
        if name in tensors:
            raise WeightError(f"{path}: tensor '{name}' appears twice")
        tensors[name] = GGUFTensor(name, qtype, tuple(int(d) for d in reversed(dims)), begin, nbytes)
    return GGUFHeader(path, version, metadata, tensors)


class GGUFStore(Mapping[str, np.ndarray]):
    """The tensors of a GGUF file: F32/F16 memory-mapped as stored, others dequantized to float32
    on each access (the reference session caches what it reads)."""

    def __init__(self, header: GGUFHeader):
        self.header = header

    def __getitem__(self, key: str) -> np.ndarray:
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize

        t = self.header.tensors[key]
        path = self.header.path
        qtype = GGMLQuantizationType(t.qtype)
        if t.nbytes == 0:
            return np.zeros(t.shape, dtype=np.float32)
        if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            dt = np.float32 if qtype == GGMLQuantizationType.F32 else np.float16
            return np.memmap(path, dtype=dt, mode="r", offset=t.offset, shape=t.shape)
        rows = int(np.prod(t.shape[:-1], dtype=np.int64))
        raw = np.memmap(path, dtype=np.uint8, mode="r", offset=t.offset, shape=(rows, t.nbytes // rows))
        try:
            out = dequantize(raw.view(np.ndarray), qtype)  # a plain view: memmap slicing is slow
        except NotImplementedError:
            raise WeightError(f"{path}: tensor '{key}' is {qtype.name}, which gguf cannot dequantize") \
                from None
        return out.reshape(t.shape).astype(np.float32, copy=False)

    def shape(self, key: str) -> tuple[int, ...]:
        return self.header.tensors[key].shape

    def __contains__(self, key: object) -> bool:  # Mapping's default would dequantize
        return key in self.header.tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self.header.tensors)

    def __len__(self) -> int:
        return len(self.header.tensors)


# -- the model ------------------------------------------------------------------------------


def llama_config(header: GGUFHeader) -> DecoderConfig:
    """The DecoderConfig of a ``general.architecture = llama`` file; errors name the file and key."""
    try:
        return _llama_config(header)
    except WeightError:
        raise
    except ConfigError as e:  # DecoderConfig's own checks name the field, not the file
        msg = str(e)
        raise ConfigError(msg if msg.startswith(str(header.path)) else f"{header.path}: {msg}") from None
    except (TypeError, ValueError) as e:  # a metadata value of the wrong type
        raise ConfigError(f"{header.path}: malformed llama GGUF metadata: {e}") from None


def _llama_config(header: GGUFHeader) -> DecoderConfig:
    meta, path = header.metadata, header.path
    arch = meta.get("general.architecture")
    if arch != "llama":
        raise ConfigError(f"{path}: unsupported GGUF architecture {arch!r} (supported: llama)")
    m = _Meta(header)
    hidden = m.size("hidden_size", "llama.embedding_length")
    heads = m.size("num_heads", "llama.attention.head_count")
    if "llama.attention.key_length" not in meta and hidden % heads:
        raise ConfigError(f"{path}: llama.attention.head_count {heads} does not divide "
                          f"llama.embedding_length {hidden}")
    head_dim = m.size("head_dim", "llama.attention.key_length", hidden // heads)
    max_pos = m.size("max_position", "llama.context_length")
    embed = header.tensors.get("token_embd.weight")
    if embed is None:
        raise WeightError(f"{path}: missing tensor 'token_embd.weight'")
    if len(embed.shape) != 2:
        raise WeightError(f"{path}: tensor 'token_embd.weight' has shape {list(embed.shape)}, not [vocab, hidden]")
    tied = "output.weight" not in header.tensors
    names = GGUF_LLAMA_NAMES if not tied else _tied(GGUF_LLAMA_NAMES)
    eos = m.optional_integer("tokenizer.ggml.eos_token_id", 0, MAX_TOKEN_ID)
    return DecoderConfig(
        family="llama",
        vocab_size=embed.shape[0],
        hidden_size=hidden,
        intermediate_size=m.size("intermediate_size", "llama.feed_forward_length"),
        num_layers=m.size("num_layers", "llama.block_count"),
        num_heads=heads,
        num_kv_heads=m.size("num_kv_heads", "llama.attention.head_count_kv", heads),
        head_dim=head_dim,
        max_position=max_pos,
        names=names,
        norm_eps=m.number("llama.attention.layer_norm_rms_epsilon", 1e-5),
        rope=_rope(header, m, head_dim),
        tie_embeddings=tied,
        eos_token_ids=() if eos is None else (eos,),
        bos_token_id=m.optional_integer("tokenizer.ggml.bos_token_id", 0, MAX_TOKEN_ID),
    )


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


class _Meta:
    """Typed reads of a GGUF file's metadata; every error names the file, the key and the value."""

    def __init__(self, header: GGUFHeader):
        self.meta, self.path = header.metadata, header.path

    def fail(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: GGUF key '{key}' = {self.meta.get(key)!r} {why}")

    def integer(self, key: str, low: int, high: int, default: int) -> int:
        v = self.optional_integer(key, low, high)
        return default if v is None else v

    def optional_integer(self, key: str, low: int, high: int) -> int | None:
        if key not in self.meta:
            return None
        v = self.meta[key]
        if not _is_int(v):
            raise self.fail(key, "must be an integer")
        if not low <= v <= high:
            raise self.fail(key, f"must be in {low}..{high}")
        return int(v)

    def size(self, what: str, key: str, default: int | None = None) -> int:
        """A size (the DecoderConfig field ``what``), bounded by ``LIMITS``; required without a default."""
        v = self.optional_integer(key, 1, LIMITS[what])
        if v is None:
            if default is None:
                raise ConfigError(f"{self.path}: missing GGUF key '{key}'")
            return default
        return v

    def number(self, key: str, default: float) -> float:
        """A positive finite number."""
        if key not in self.meta:
            return default
        v = self.meta[key]
        if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, (bool, np.bool_)) \
                or not math.isfinite(v):
            raise self.fail(key, "must be a finite number")
        if v <= 0:
            raise self.fail(key, "must be positive")
        return float(v)

    def string(self, key: str, default: str) -> str:
        v = self.meta.get(key, default)
        if not isinstance(v, str):
            raise self.fail(key, "must be a string")
        return v


def _tied(names: WeightNames) -> WeightNames:
    from dataclasses import replace

    return replace(names, lm_head=None)


def _rope(header: GGUFHeader, m: _Meta, head_dim: int) -> RopeConfig:
    """Interleaved rope (see the module docstring) with the file's base, dims and scaling."""
    meta, path = header.metadata, header.path
    theta = m.number("llama.rope.freq_base", 10000.0)
    rot = m.integer("llama.rope.dimension_count", 1, head_dim, head_dim)
    kind = m.string("llama.rope.scaling.type", "none")
    factor = m.number("llama.rope.scaling.factor", m.number("llama.rope.scale_linear", 1.0))
    if kind == "none" and factor != 1.0 and "llama.rope.scale_linear" in meta:
        kind = "linear"
    orig = m.integer("llama.rope.scaling.original_context_length", 1, LIMITS["max_position"], 0)
    base = RopeConfig(theta=theta, style="interleaved", rotary_dim=rot)
    if "rope_freqs.weight" in header.tensors:
        return _llama3_rope(header, base, orig or 8192)
    if kind == "none":
        return base
    if kind == "linear":
        from dataclasses import replace

        return replace(base, scaling="linear", factor=factor)
    raise ConfigError(f"{path}: llama.rope.scaling.type {kind!r} is not supported (none, linear, "
                      "or llama3 factors in rope_freqs.weight)")


def _llama3_rope(header: GGUFHeader, base: RopeConfig, orig: int) -> RopeConfig:
    """llama.cpp stores Llama 3.1 rope scaling as per-frequency divisors (``rope_freqs.weight``),
    not as parameters. They are matched against the llama3 rule with Meta's low/high frequency
    factors (1, 4); a file whose divisors follow another rule is refused."""
    from dataclasses import replace

    have = np.asarray(GGUFStore(header)["rope_freqs.weight"], dtype=np.float64).reshape(-1)
    factor, low, high = float(have.max()), 1.0, 4.0
    rot = base.rotary_dim or 0
    inv = base.theta ** (-np.arange(0, rot, 2, dtype=np.float64) / rot)
    wavelen = 2 * np.pi / inv
    smooth = (orig / wavelen - low) / (high - low)
    want = np.where(wavelen < orig / high, 1.0,
                    np.where(wavelen > orig / low, factor, 1 / ((1 - smooth) / factor + smooth)))
    if have.shape != want.shape or not np.allclose(have, want, rtol=1e-4):
        raise ConfigError(f"{header.path}: rope_freqs.weight does not follow llama3 rope scaling "
                          f"(factor {factor}, low 1, high 4, original context {orig}); not supported")
    return replace(base, scaling="llama3", factor=factor, low_freq_factor=low, high_freq_factor=high,
                   original_max_position=orig)
