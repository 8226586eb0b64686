"""Sessions over a compiled artifact. ``device="cpu"`` runs the artifact's own Triton kernels in
Triton's interpreter (fp32/fp16): the same kernels the GPU runs, so CPU tests check them.

Nothing here imports the compiler (no xDSL, no frontend): an artifact is self-contained.
Triton's interpreter mode is chosen when Triton is first imported, so a CPU session must be
created before anything in the process imports Triton for the GPU.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from inferx.program import ModelInfo
from inferx.runtime.artifact import Artifact, load_artifact
from inferx.runtime.kernel_source import KernelSource
from inferx.runtime.plan import bind, run
from inferx.runtime.session import DecoderSession, SessionError

NP_DTYPE = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i64": np.int64, "i8": np.int8}


def _enable_interpreter() -> None:
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise SessionError(
            "CPU sessions run kernels in Triton's interpreter, which must be enabled before Triton is "
            "imported: set TRITON_INTERPRET=1 in the environment, or load the artifact before importing triton"
        )
    os.environ["TRITON_INTERPRET"] = "1"


class ArtifactSession(DecoderSession):
    """prefill/decode/generate over an artifact's launch plan, on the CPU."""

    def __init__(self, artifact: Artifact, *, max_batch: int | None = None):
        import torch

        _enable_interpreter()
        from inferx.runtime.triton_kernels import load_kernel

        m = artifact.manifest
        model = m["model"]
        limits = m["limits"]
        info = ModelInfo(
            architecture=model["architecture"], vocab_size=model["vocab_size"], max_context=model["max_context"],
            eos_token_ids=tuple(model["eos_token_ids"]), num_layers=model["num_layers"],
            num_kv_heads=model["num_kv_heads"], head_dim=model["head_dim"], dtype=model["dtype"],
        )
        batch = limits["max_batch"] if max_batch is None else max_batch
        if batch > limits["max_batch"]:
            raise SessionError(f"max_batch {batch} exceeds the artifact's compiled maximum {limits['max_batch']}")
        super().__init__(info, max_batch=batch, max_context=limits["max_seq_len"])
        if info.dtype not in NP_DTYPE:
            raise SessionError(f"CPU sessions run fp32/fp16 artifacts; this one is {info.dtype}")
        self.torch = torch
        self.dtypes = {"f32": torch.float32, "f16": torch.float16, "i32": torch.int32, "i64": torch.int64}
        self.entries = m["entries"]
        self.kernels: dict[str, tuple[KernelSource, Any]] = {}
        for name, meta in m["kernels"].items():
            ks = KernelSource.from_json({**meta, "source": artifact.file_bytes(meta["file"]).decode()})
            self.kernels[name] = (ks, load_kernel(ks, interpret=True))
        self.weights: dict[str, Any] = {}
        for name, w in m["weights"].items():
            arr = np.array(artifact.mmap(w["file"], NP_DTYPE[w["dtype"]], tuple(w["shape"])))
            self.weights[name] = torch.from_numpy(arr)
        self.caches: list[Any] = []

    def _reset_cache(self, batch: int) -> None:
        i = self.info
        dtype = self.torch.float32 if i.dtype == "f32" else self.torch.float16
        shape = (batch, i.num_kv_heads, self.max_context, i.head_dim)
        self.caches = [self.torch.zeros(shape, dtype=dtype) for _ in range(2 * i.num_layers)]

    def _step(self, entry: str, input_ids: np.ndarray, positions: np.ndarray, kv_lens: np.ndarray) -> np.ndarray:
        torch = self.torch
        args = [torch.from_numpy(input_ids.astype(np.int32)), torch.from_numpy(positions.astype(np.int32)),
                torch.from_numpy(kv_lens.astype(np.int32)), *self.caches]
        env = {"batch": input_ids.shape[0], "seq": input_ids.shape[1], "ctx": self.max_context}
        launches, results = bind(self.entries[entry], self.kernels, args, self.weights, env,
                                 lambda shape, dtype: torch.empty(shape, dtype=self.dtypes[dtype]),
                                 lambda shape, dtype: torch.zeros(shape, dtype=self.dtypes[dtype]))
        run(launches)
        self.caches = results[1:]
        return results[0].float().numpy()


def load(artifact: str | Path, device: str = "cpu", **options: Any) -> DecoderSession:
    """Loads an artifact (directory or .ixa) and returns a Session on ``device``."""
    if device == "cpu":
        art = load_artifact(artifact)
        return ArtifactSession(art, **options)
    if device == "cuda":
        import torch

        art = load_artifact(artifact)
        target = art.manifest["target"]
        if not torch.cuda.is_available():
            raise SessionError(
                f"device='cuda' needs an NVIDIA GPU and no CUDA GPU is available here (torch.cuda.is_available() "
                f"is False); to run on the CPU, load with device='cpu' an artifact compiled with --target cpu "
                f"(this one targets {target})"
            )
        raise SessionError(
            f"CUDA sessions are not built yet (artifact target {target}); load with device='cpu' "
            "from an artifact compiled with --target cpu"
        )
    raise SessionError(f"unknown device {device!r}: use 'cpu' or 'cuda'")
