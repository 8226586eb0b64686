"""A step's tokens drawn from its logits, wherever they are: on the device by one launch of the
device sampler (``inferx.runtime.device_sampling``) when a session leaves its logits on the GPU,
so that only the tokens cross to the host; on the host by the reference sampler
(``inferx.runtime.sampling``) otherwise. Both give the tokens ``sampling.sample_row`` gives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from inferx.runtime.sampling import SamplingParams, sample_rows


def draw(logits: Any, rows: Sequence[int], held: Sequence[np.ndarray], params: Sequence[SamplingParams],
         steps: Sequence[int], logprobs: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """The next token of the sequences in ``rows`` of a step's ``logits`` [n, 1, vocab] and their
    log-probabilities (0 where not asked), as host arrays: by one launch of the device sampler
    (``inferx.runtime.device_sampling``) where the logits are a CUDA tensor, so that only the
    tokens cross to the host; by ``sample_rows`` for host logits. ``held``: each sequence's
    tokens so far (read only where its repetition penalty is on)."""
    if getattr(logits, "is_cuda", False):
        return draw_on_device(logits, rows, held, params, steps, logprobs)
    x = logits.float().cpu().numpy() if hasattr(logits, "detach") else np.asarray(logits)
    return sample_rows(x[list(rows), 0], held, params, steps, logprobs)


def draw_on_device(logits: Any, rows: Sequence[int], held: Sequence[np.ndarray], params: Sequence[SamplingParams],
                   steps: Sequence[int], logprobs: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    """``draw`` for a torch tensor of logits: the rows taken and the held tokens marked where the
    logits are, one launch of the device sampler, the tokens and log-probabilities copied back
    (on the CPU, a tensor runs the same kernel in Triton's interpreter)."""
    import torch

    from inferx.runtime.device_sampling import sample_on_device

    sub = logits[torch.as_tensor(list(rows), device=logits.device), 0].contiguous()
    presence = None
    if any(p.repetition_penalty != 1.0 for p in params):
        presence = torch.zeros(sub.shape, dtype=torch.uint8, device=logits.device)
        for i, h in enumerate(held):
            if h.size:
                presence[i, torch.as_tensor(h, device=logits.device)] = 1
    tokens, lps = sample_on_device(sub, params, [int(s) for s in steps], presence)
    lps = torch.where(torch.as_tensor(list(logprobs), device=logits.device), lps, torch.zeros_like(lps))
    return tokens.cpu().numpy().astype(np.int64), lps.double().cpu().numpy()
