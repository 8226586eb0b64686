"""The streaming kernel behind ``floor.time_chain`` (imported only where something is measured:
Triton is needed there, not to read or print results)."""

import triton
import triton.language as tl

BLOCK = 2048  # bf16 elements per load step (4 KB)


@triton.jit
def read_sum(x, out, n, CHUNK: tl.constexpr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    """Program i sums elements [i * CHUNK, (i + 1) * CHUNK) of x (n of them in all) into out[i]."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * CHUNK
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, CHUNK, BLOCK):
        offs = base + i + tl.arange(0, BLOCK)
        acc += tl.load(x + offs, mask=offs < n, other=0).to(tl.float32)
    tl.store(out + pid, tl.sum(acc))
