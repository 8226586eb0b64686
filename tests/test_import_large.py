"""Importing a Llama-3-8B-shaped checkpoint is fast and reads no weights (issue acceptance:
<= 10 s on our 2-core CPU machine)."""

import resource
import time
from pathlib import Path

from large_checkpoint import LLAMA3_8B, write_checkpoint

import inferx


def test_import_llama3_8b_shape_is_fast_and_lazy(tmp_path: Path) -> None:
    total = write_checkpoint(tmp_path / "llama3-8b")
    assert total > 15e9  # 16 GB of bf16 weights, as a sparse file
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    program = inferx.import_model(tmp_path / "llama3-8b")
    elapsed = time.perf_counter() - start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert program.info is not None and program.info.num_layers == LLAMA3_8B["num_hidden_layers"]
    assert len(program.weights) == 32 * 9 + 3
    assert elapsed <= 10.0, f"import took {elapsed:.2f} s (limit 10 s)"
    grew = rss_after - rss_before
    assert grew < 512 << 20, f"import grew the peak RSS by {grew / 2**20:.0f} MiB: weights were read"
