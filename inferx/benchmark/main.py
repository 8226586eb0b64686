"""``inferx bench`` behind the CLI: options from their command-line text, the GPU check, the run,
the printed tables and the JSON file."""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path

from inferx.benchmark import report
from inferx.benchmark.run import BenchOptions, Hooks, Progress, run_bench
from inferx.signals import raising_on


class BenchError(ValueError):
    """A request the benchmark cannot serve (bad option, no GPU): one line for the user."""


def int_list(text: str, what: str) -> tuple[int, ...]:
    """``"1,4,16"`` -> (1, 4, 16); an empty text -> (); BenchError names the option and the bad item."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise BenchError(f"{what} {text!r}: {part!r} is not a positive integer")
        out.append(int(part))
    return tuple(out)


def name_list(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def options(shape: str, batch: str, context: str, prefill: str, peers: str, compile_mode: str, iters: int,
            warmup: int, device: str, workdir: str | None, kernels: bool = True, pdl: bool = True,
            overlap: bool = False, fuse_mlp: bool = False, fuse_attention_o: bool = False,
            prefill_last: bool = False, quant: str | None = None, quant_head: bool = False, kv_fp8: bool = False,
            fp8_inputs_once: bool = True, fp8_decode_min_batch: int | None = None) -> BenchOptions:
    """BenchOptions from the command line's text; BenchError on anything invalid."""
    try:
        return BenchOptions(shapes=name_list(shape), batches=int_list(batch, "--batch"),
                            contexts=int_list(context, "--context"), prefills=int_list(prefill, "--prefill"),
                            peers=name_list(peers), compile_modes=name_list(compile_mode) or ("reduce-overhead",),
                            iters=iters, warmup=warmup, device=device,
                            workdir=Path(workdir) if workdir else None, kernels=kernels, pdl=pdl,
                            overlap=overlap, fuse_mlp=fuse_mlp, fuse_attention_o=fuse_attention_o,
                            prefill_last=prefill_last, quant=quant, quant_head=quant_head, kv_fp8=kv_fp8,
                            fp8_inputs_once=fp8_inputs_once, fp8_decode_min_batch=fp8_decode_min_batch)
    except ValueError as e:
        raise BenchError(str(e)) from None


def check_device(opts: BenchOptions) -> None:
    """BenchError unless the device can run ``opts``: CUDA must be visible for "cuda"; "cpu" only
    runs the tiny shape (it exercises the code paths; its numbers mean nothing)."""
    import torch

    if opts.device == "cuda" and not torch.cuda.is_available():
        raise BenchError("inferx bench needs an NVIDIA GPU (CUDA) and torch sees none; "
                         "--shape tiny --device cpu only exercises the code")
    if opts.device == "cpu" and set(opts.shapes) - {"tiny"}:
        raise BenchError("--device cpu runs only --shape tiny (the real shapes need the GPU)")


def bench(opts: BenchOptions, out: Path | None, hooks: Hooks | None = None) -> dict:
    """Runs the benchmark, prints its tables to stdout, writes the JSON to ``out`` if given (after
    each shape, atomically)."""
    check_device(opts)

    def save(results: dict) -> None:  # after every shape, so a run cut short keeps what it measured
        if out is not None:
            report.write_json(results, out)
            print(f"wrote {out} ({len(results['shapes'])} of {len(opts.shapes)} shapes)", file=sys.stderr, flush=True)

    with _exit_on_sigterm():
        results = run_bench(opts, hooks, Progress(), on_shape=save)
    print(report.render(results), flush=True)
    return results


def _exit_on_sigterm() -> contextlib.AbstractContextManager[None]:
    """SIGTERM (``timeout``, a job scheduler) ends the run as an exception would: the work
    directory with its checkpoint and artifact (16 GB for the 8B shape) is removed, not left to
    fill the disk of the next run."""
    return raising_on((signal.SIGTERM,), lambda sig: SystemExit(128 + sig.value))
