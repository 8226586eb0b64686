"""Timing, and the peers InferX is measured against: each returns milliseconds per step.

``time_ms`` times a step the way the runtime's ``time_step`` does: after ``warmup`` untimed steps,
a pair of device events around each of ``iters`` steps, all recorded before one synchronization
(on the CPU, the host clock around each step). Steps run under ``torch.inference_mode``.

Peers, on the same device, weights and dtype as InferX:
- ``eager``: ``PlainLlama`` (inferx.benchmark.llama) called step by step.
- ``compile``: ``torch.compile`` of ``PlainLlama`` in one mode ("reduce-overhead", "max-autotune",
  ...; prefill in the default mode). Batch and cache length are marked dynamic up front, so one
  compilation serves batch 1 (torch specializes size 1) and one every larger batch, whatever the
  context: only attention (an external kernel) and the cache write see the context length.
- ``hf``: HF ``LlamaForCausalLM`` in eager mode with a ``StaticCache`` (a ``DynamicCache`` where the
  installed transformers has no StaticCache): the cache is filled by a chunked prefill of
  ``context - 1`` tokens, then each timed step appends one token, so the step sees ``context``
  positions first and ``context + warmup + iters - 1`` last (a static cache's attention spans
  its whole allocated length anyway).

Decode steps are timed at ``context`` positions counting the new token: the plain model's cache
holds exactly ``context`` positions (random values) and the token is written at ``context - 1``.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from inferx.benchmark.llama import PlainLlama

PREFILL_CHUNK = 512  # tokens per forward when filling HF's cache before decode timing

# gpt-fast's Inductor settings (coordinate-descent tuning of generated kernels' block sizes), and
# room for the compiled variants one run makes (modes x batch-1/larger x decode/prefill).
COMPILE_SETTINGS = {"_inductor.config.coordinate_descent_tuning": True,
                    "_inductor.config.triton.unique_kernel_names": True,
                    "_dynamo.config.cache_size_limit": 64}


def configure_compile() -> dict[str, object]:
    """Applies COMPILE_SETTINGS to this process's torch and returns them (for the results)."""
    import torch._dynamo
    import torch._inductor.config

    torch._inductor.config.coordinate_descent_tuning = True
    torch._inductor.config.triton.unique_kernel_names = True
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    return dict(COMPILE_SETTINGS)


def time_ms(step: Callable[[], Any], device: str, warmup: int, iters: int) -> list[float]:
    """Milliseconds of each of ``iters`` calls of ``step`` after ``warmup`` untimed ones."""
    with torch.inference_mode():
        for _ in range(warmup):
            step()
        if not str(device).startswith("cuda"):
            out = []
            for _ in range(iters):
                start = time.perf_counter()
                step()
                out.append((time.perf_counter() - start) * 1e3)
            return out
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for a, b in events:
            a.record()
            step()
            b.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) for a, b in events]


def _tokens(vocab: int, shape: tuple[int, ...], device: str, seed: int) -> torch.Tensor:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=gen).to(device)


def _mark_dynamic(t: torch.Tensor, dims: tuple[int, ...]) -> None:
    for d in dims:
        if t.shape[d] > 1:
            torch._dynamo.maybe_mark_dynamic(t, d)


class PlainPeer:
    """Eager and torch.compile steps of one ``PlainLlama``, reused for every config of a shape."""

    def __init__(self, hf_model: Any, device: str):
        self.model = PlainLlama(hf_model)
        self.device = device
        self.vocab = hf_model.config.vocab_size
        self.compiled: dict[str, Callable[..., torch.Tensor]] = {}

    def _fn(self, mode: str | None) -> Callable[..., torch.Tensor]:
        if mode is None:
            return self.model
        key = mode
        if key not in self.compiled:
            self.compiled[key] = torch.compile(self.model, mode=None if mode == "default" else mode, fullgraph=True)
        return self.compiled[key]

    def _step(self, fn: Callable[..., torch.Tensor], mode: str | None, ids: torch.Tensor,
              positions: torch.Tensor, attend: str, last: bool = False) -> Callable[[], Any]:
        if mode in ("reduce-overhead", "max-autotune"):  # these modes replay CUDA graphs
            def step() -> Any:
                torch.compiler.cudagraph_mark_step_begin()
                return fn(ids, positions, attend, last)
            return step
        return lambda: fn(ids, positions, attend, last)

    def decode(self, batch: int, context: int, warmup: int, iters: int, mode: str | None = None) -> list[float]:
        """One decode step at ``context`` positions; ``mode`` None is eager, else a torch.compile mode."""
        self.model.setup_cache(batch, context, fill="random")
        try:
            ids = _tokens(self.vocab, (batch, 1), self.device, seed=batch)
            positions = torch.tensor([context - 1], device=self.device)
            if mode is not None:
                _mark_dynamic(ids, (0,))
                for t in (*self.model.k_cache, *self.model.v_cache):
                    _mark_dynamic(t, (0, 2))
            return time_ms(self._step(self._fn(mode), mode, ids, positions, "all"), self.device, warmup, iters)
        finally:
            self.model.free_cache()

    def prefill(self, batch: int, seq: int, warmup: int, iters: int, mode: str | None = None,
                last: bool = False) -> list[float]:
        """A prefill of ``seq`` tokens per sequence from an empty cache, every token's logits (the
        last token's alone with ``last``)."""
        self.model.setup_cache(batch, seq)
        try:
            ids = _tokens(self.vocab, (batch, seq), self.device, seed=seq)
            positions = torch.arange(seq, device=self.device)
            if mode is not None:
                _mark_dynamic(ids, (0, 1))
                _mark_dynamic(positions, (0,))
                for t in (*self.model.k_cache, *self.model.v_cache):
                    _mark_dynamic(t, (0, 2))
            return time_ms(self._step(self._fn(mode), mode, ids, positions, "causal", last), self.device, warmup,
                           iters)
        finally:
            self.model.free_cache()


def _cache_keyword(model: Any) -> str:
    """The name under which this transformers version's forward takes the KV cache."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def make_hf_cache(config: Any, batch: int, length: int, device: str, dtype: torch.dtype) -> tuple[Any, str]:
    """A static KV cache of ``length`` positions and its kind ("static"), or an empty dynamic
    cache ("dynamic") where this transformers has no StaticCache."""
    import transformers

    static = getattr(transformers, "StaticCache", None)
    if static is not None:
        try:
            return static(config=config, max_cache_len=length), "static"
        except TypeError:  # versions that allocate up front
            return static(config=config, max_batch_size=batch, max_cache_len=length, device=device,
                          dtype=dtype), "static"
    return transformers.DynamicCache(), "dynamic"


class HFPeer:
    """Eager steps of HF ``LlamaForCausalLM``."""

    def __init__(self, hf_model: Any, device: str):
        self.model = hf_model
        self.device = device
        self.vocab = hf_model.config.vocab_size
        self.keyword = _cache_keyword(hf_model)
        self.cache_kind = ""

    @contextlib.contextmanager
    def _filled_cache(self, batch: int, context: int, steps: int) -> Iterator[Any]:
        cache, self.cache_kind = make_hf_cache(self.model.config, batch, context + steps, self.device,
                                               self.model.dtype)
        prompt = _tokens(self.vocab, (batch, context - 1), self.device, seed=context)
        with torch.inference_mode():
            for start in range(0, context - 1, PREFILL_CHUNK):
                self.model(prompt[:, start:start + PREFILL_CHUNK], use_cache=True, logits_to_keep=1,
                           **{self.keyword: cache})
        try:
            yield cache
        finally:
            del cache

    def decode(self, batch: int, context: int, warmup: int, iters: int) -> list[float]:
        """Decode steps from ``context`` positions on (see the module docstring)."""
        with self._filled_cache(batch, context, warmup + iters + 1) as cache:
            ids = _tokens(self.vocab, (batch, 1), self.device, seed=batch)
            kwargs = {self.keyword: cache, "use_cache": True}
            return time_ms(lambda: self.model(ids, **kwargs), self.device, warmup, iters)

    def prefill(self, batch: int, seq: int, warmup: int, iters: int, last: bool = False) -> list[float]:
        """A forward over ``seq`` tokens per sequence without a cache, every token's logits (the
        last token's alone with ``last``: ``logits_to_keep=1``)."""
        ids = _tokens(self.vocab, (batch, seq), self.device, seed=seq)
        keep = {"logits_to_keep": 1} if last else {}
        return time_ms(lambda: self.model(ids, use_cache=False, **keep), self.device, warmup, iters)
