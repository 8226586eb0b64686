"""The benchmark's flow: for each shape, make the model, compile and time InferX, time the peers,
and fold everything into one results dictionary (``report`` prints and writes it).

Once, first: the device's copy and matmul rates (the roofline) and, on a GPU when kernels are
timed, the launch floor (``floor.py``: fixed cost per launch and read rate of chained streaming
kernels, shown beside the decode kernels; a failure there is noted and the run goes on).

Per shape, in this order, with a progress line on stderr before each long step:
1. ``make_model``: the HF model with random weights, built on the device (shapes.py);
2. InferX: save the checkpoint into the work directory, ``inferx.compile`` it, ``inferx.load`` it,
   then ``time_step`` every decode and prefill config, ``time_kernels`` for the smallest and
   largest decode batch and the longest prefill, a few ``decode`` calls for the host time per
   step; the session is closed before the peers run;
3. the peers, each once for every config (peers.py); a failing measurement is recorded with its
   error and the run goes on;
4. everything of the shape is freed (models, caches, compiled graphs, temporary files).

The HF model in memory is the one the checkpoint was written from, so InferX and every peer read the
same weights without reading the checkpoint back. InferX runs only on a CUDA device; on the CPU
(``--shape tiny --device cpu``) it is skipped unless ``Hooks`` supply a compiler and a loader, which
is how tests exercise this flow.

Scripts that reach ``run_bench`` must call it under ``if __name__ == "__main__":`` (kernels are
built in spawned worker processes that import the main module).
"""

from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from inferx.benchmark import report
from inferx.benchmark.floor import measure_launch_floor
from inferx.benchmark.roofline import Ceilings, Dims, measure_ceilings
from inferx.benchmark.shapes import LONG_NAMES, SHAPES, is_complete, make_config, make_model, save_checkpoint

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class BenchOptions:
    """What to measure. ``compile_modes`` are torch.compile modes for the decode peer (the table
    shows the fastest); ``workdir`` None means a temporary directory removed shape by shape, a
    given one keeps checkpoints and artifacts and reuses them on the next run."""

    shapes: tuple[str, ...] = ("1b", "8b")
    batches: tuple[int, ...] = (1, 4, 16, 64)
    contexts: tuple[int, ...] = (512, 2048)
    prefills: tuple[int, ...] = (512, 2048)
    peers: tuple[str, ...] = report.PEERS
    compile_modes: tuple[str, ...] = ("reduce-overhead",)
    iters: int = 30
    warmup: int = 5
    device: str = "cuda"
    workdir: Path | None = None
    kernels: bool = True
    jobs: int = field(default_factory=lambda: min(8, os.cpu_count() or 2))
    seed: int = 0
    pdl: bool = True  # InferX's CUDA session launches with programmatic dependent launch
    overlap: bool = False  # compiled so that under PDL a decode GEMV's weights stream as the kernel before ends
    fuse_mlp: bool = False  # compiled with each decode layer's MLP as one kernel (batches up to 8)
    fuse_attention_o: bool = False  # and/or its attention and o projection as one (batches up to 8)
    prefill_last: bool = False  # each prefill also timed returning the last token's logits alone
    # an int4 scheme or "fp8": a second InferX artifact with quantized linears, timed as "inferx-int4"
    # or "inferx-fp8"
    quant: str | None = None
    quant_head: bool = False  # ... its LM head quantized too
    kv_fp8: bool = False  # ... its KV cache in FP8 (scale 1 for every head: random weights, nothing to calibrate)
    fp8_inputs_once: bool = True  # ... with quant fp8, prompts' x quantized once (fp8-inputs)
    fp8_decode_min_batch: int | None = None  # ... and decode batches' from this batch bucket

    def __post_init__(self) -> None:
        unknown = [s for s in self.shapes if s not in SHAPES]
        if unknown:
            raise ValueError(f"unknown shape {unknown[0]!r}: the shapes are {', '.join(SHAPES)}")
        bad = [p for p in self.peers if p not in report.PEERS]
        if bad:
            raise ValueError(f"unknown peer {bad[0]!r}: the peers are {', '.join(report.PEERS)}")
        if min((*self.batches, *self.contexts, *self.prefills, self.iters), default=1) < 1 or self.warmup < 0:
            raise ValueError("batches, contexts, prefill lengths and --iters must be positive, --warmup not negative")
        if self.device not in ("cuda", "cpu"):
            raise ValueError(f"unknown device {self.device!r}: use cuda or cpu")
        if self.quant is not None and self.quant != "fp8":
            from inferx.compiler.ir.quant import SchemeError, parse_scheme

            try:
                parse_scheme(self.quant)
            except SchemeError:
                raise ValueError(f"unknown quant scheme {self.quant!r}: the schemes are int4-g128, int4-g64 and "
                                 "int4-g32, each optionally with -sym, and fp8") from None
        if self.quant_head and self.quant is None:
            raise ValueError("--quant-head needs --quant SCHEME (or fp8)")
        if self.kv_fp8 and self.quant is None:
            raise ValueError("--kv-fp8 puts the quantized artifact's KV cache in FP8: give --quant SCHEME (or fp8)")

    @property
    def max_seq_len(self) -> int:
        return max((*self.contexts, *self.prefills), default=1)


@dataclass(frozen=True)
class Hooks:
    """How InferX is compiled and loaded: ``compile(checkpoint_dir, artifact_path, options)`` and
    ``load(artifact_path, device)``; the defaults call ``inferx.compile`` and ``inferx.load``. A
    session must answer ``time_step``, ``time_kernels``, ``prefill``, ``decode``, ``reset`` and
    carry ``host_ms`` (inferx.runtime)."""

    compile: Callable[[Path, Path, BenchOptions, Callable[[str], None], str | None], Path] | None = None
    load: Callable[[Path, str], Any] | None = None


def _compile_inferx(ckpt: Path, out: Path, opts: BenchOptions, say: Callable[[str], None],
                    quant: str | None = None) -> Path:
    """The bf16 artifact, or with ``quant`` the quantized one (``opts.quant_head``: its LM head too;
    ``opts.kv_fp8``: its KV cache in FP8; ``opts.fp8_inputs_once`` and ``opts.fp8_decode_min_batch``:
    x quantized once)."""
    import inferx

    return inferx.compile(str(ckpt), target="h200", output=str(out), dtype="bf16", max_seq_len=opts.max_seq_len,
                          max_batch=max(opts.batches), jobs=opts.jobs, overlap=opts.overlap,
                          fuse_mlp=opts.fuse_mlp, fuse_attention_o=opts.fuse_attention_o, quant=quant,
                          quant_head=opts.quant_head and quant is not None, progress=lambda line: say(f"  {line}"),
                          **({"kv_dtype": "fp8", "kv_scale": 1.0} if opts.kv_fp8 and quant is not None else {}),
                          fp8_inputs_once=opts.fp8_inputs_once, fp8_decode_min_batch=opts.fp8_decode_min_batch)


GENERATE_PROMPT, GENERATE_TOKENS = 128, 256


def _generate_ms(session: Any, vocab: int, opts: BenchOptions) -> dict[str, Any] | None:
    """Time a token through ``generate`` at batch 1 (a 128-token prompt, greedy): the wall time
    of ``GENERATE_TOKENS`` tokens less that of one (the prefill and the first draw), over the
    tokens after the first, medians of three. A session that can leave its logits on the device
    (``outputs``) does so here, as ``inferx serve`` and ``inferx run`` load it, so each token is
    drawn there. Beside the decode step this is how much of a step the host loop adds."""
    import numpy as np

    if getattr(session, "max_context", 0) < GENERATE_PROMPT + GENERATE_TOKENS:
        return None  # a short context (or a stand-in session) has no room for the figure
    before = getattr(session, "outputs", None)
    try:
        if before is not None:
            session.outputs = "torch"
        prompt = np.random.default_rng(opts.seed).integers(0, vocab, (1, GENERATE_PROMPT))
        session.generate(prompt, GENERATE_TOKENS, stop_at_eos=False)  # captures the graph
        walls = []
        for n in (1, GENERATE_TOKENS) * 3:
            start = time.perf_counter()
            session.generate(prompt, n, stop_at_eos=False)
            walls.append((n, time.perf_counter() - start))
        one = statistics.median(w for n, w in walls if n == 1)
        many = statistics.median(w for n, w in walls if n > 1)
        return {"ms_per_token": (many - one) * 1e3 / (GENERATE_TOKENS - 1), "prompt": GENERATE_PROMPT,
                "tokens": GENERATE_TOKENS, "logits_on_device": before is not None}
    except Exception as e:  # noqa: BLE001 - reported in place of the numbers
        return {"error": _one_line(e)}
    finally:
        if before is not None:
            session.outputs = before


def _load_inferx(art: Path, device: str, pdl: bool) -> Any:
    import inferx

    return inferx.load(str(art), device=device, **({"pdl": pdl} if device == "cuda" else {}))


def _one_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return " ".join(text.split())[:500]


def environment(device: str) -> dict[str, Any]:
    """Device name, versions of the toolchain, the git commit and the date. ``INFERX_COMMIT`` in the
    environment names the commit when the tree was copied without its history (a lent GPU box
    gets the working tree, not the repository's current HEAD); else ``git rev-parse HEAD``, else
    ``unknown``."""
    import torch

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for name in ("triton", "transformers", "inferx"):
        try:
            from importlib.metadata import version

            versions[name] = version(name)
        except Exception:  # noqa: BLE001 - a missing package is reported as such
            versions[name] = "not installed"
    commit, dirty = "unknown", None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip() or "unknown"
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                    capture_output=True, text=True, timeout=10, check=True).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    if os.environ.get("INFERX_COMMIT"):
        commit, dirty = os.environ["INFERX_COMMIT"], None
    name = torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine()
    return {"device": name, "versions": versions, "commit": commit, "dirty": dirty,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}


class Progress:
    """Progress lines on stderr, each with the seconds since the run began."""

    def __init__(self, sink: Callable[[str], None] | None = None):
        self.start = time.perf_counter()
        self.sink = sink or (lambda line: print(line, file=sys.stderr, flush=True))

    def __call__(self, line: str) -> None:
        self.sink(f"[{time.perf_counter() - self.start:7.1f} s] {line}")


def run_bench(opts: BenchOptions, hooks: Hooks | None = None, say: Callable[[str], None] | None = None,
              on_shape: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Runs every shape of ``opts`` and returns the results (see report.py for their layout);
    ``on_shape`` gets the results so far after each shape (to save them before a later one fails)."""
    say = say or Progress()
    hooks = hooks or Hooks()
    from inferx.benchmark.peers import configure_compile

    results: dict[str, Any] = {**environment(opts.device), "options": _jsonable(asdict(opts))}
    if "compile" in opts.peers:
        results["torch_compile_settings"] = configure_compile()
    say("measuring copy bandwidth and bf16 matmul rate")
    ceilings = measure_ceilings(opts.device)
    results["ceilings"] = asdict(ceilings)
    say(f"copy {ceilings.copy_bytes_per_s / 1e12:.2f} TB/s, matmul {ceilings.matmul_flops_per_s / 1e12:.0f} TFLOP/s")
    if opts.device.startswith("cuda") and opts.kernels:
        say("measuring the floor of a chain of streaming kernels (fixed cost per launch, read rate)")
        try:
            floor = measure_launch_floor()
            results["launch_floor"] = asdict(floor)
            say(f"floor: {floor.launch_s * 1e6:.2f} us per launch + bytes / {floor.read_bytes_per_s / 1e12:.2f} TB/s")
        except Exception as e:  # noqa: BLE001 - the floor is a diagnostic; the run goes on
            results["launch_floor"] = {"error": _one_line(e)}
            say(f"floor not measured: {_one_line(e)}")
    results["shapes"] = []
    for shape in opts.shapes:
        results["shapes"].append(run_shape(shape, opts, ceilings, hooks, say))
        _free(opts.device)
        if on_shape is not None:
            on_shape(results)
    return results


def run_shape(shape: str, opts: BenchOptions, ceilings: Ceilings, hooks: Hooks,
              say: Callable[[str], None]) -> dict[str, Any]:
    """One shape's measurements, rows and notes (see the module docstring for the steps)."""
    import torch

    out: dict[str, Any] = {"shape": shape, "name": LONG_NAMES[shape], "hf_config": SHAPES[shape], "notes": [],
                           "setup_s": {}, "measurements": []}
    dims = Dims.of(make_config(shape))
    out["dims"] = asdict(dims)
    workdir = Path(opts.workdir) / shape if opts.workdir else Path(tempfile.mkdtemp(prefix=f"inferx-bench-{shape}-"))
    try:
        clock = time.perf_counter()
        say(f"{shape}: generating random bf16 weights on {opts.device}")
        model = make_model(shape, opts.device, torch.bfloat16, seed=opts.seed)
        out["setup_s"]["weights"] = time.perf_counter() - clock
        use_inferx = hooks.load is not None or opts.device == "cuda"
        if use_inferx:
            _measure_inferx(shape, model, opts, workdir, hooks, out, say)
        else:
            out["notes"].append("InferX skipped: it runs on a CUDA device")
        _free(opts.device)
        _measure_peers(shape, model, opts, out, say)
        del model
    finally:
        if opts.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    out["rows"] = report.config_rows(out["measurements"], dims, ceilings, quant=_quant_bytes(opts))
    return out


def _quant_bytes(opts: BenchOptions) -> report.QuantBytes | None:
    if opts.quant is None:
        return None
    kv_elem = 1 if opts.kv_fp8 else None
    if opts.quant == "fp8":
        return report.QuantBytes(group=0, symmetric=True, head=opts.quant_head, kind="fp8", kv_elem=kv_elem)
    from inferx.compiler.ir.quant import parse_scheme

    scheme = parse_scheme(opts.quant)
    return report.QuantBytes(group=scheme.group, symmetric=scheme.symmetric, head=opts.quant_head, kv_elem=kv_elem)


def _configs(opts: BenchOptions) -> list[tuple[str, int, int, int]]:
    """(entry, batch, seq, context) of every measurement, decode first."""
    decode = [("decode", b, 1, c) for b in opts.batches for c in opts.contexts]
    prefill = [(entry, 1, s, s) for s in opts.prefills
               for entry in ("prefill", "prefill_last")[: 2 if opts.prefill_last else 1]]
    return decode + prefill


def compile_settings(opts: BenchOptions, quant: str | None = None) -> str:
    """The options an artifact is compiled with, as a kept work directory records them: a run with
    other settings compiles again instead of timing the kept artifact."""
    settings: dict[str, Any] = {"max_batch": max(opts.batches), "max_seq_len": opts.max_seq_len,
                                "overlap": opts.overlap, "fuse_mlp": opts.fuse_mlp,
                                "fuse_attention_o": opts.fuse_attention_o}
    if quant is not None:
        settings.update(quant=quant, quant_head=opts.quant_head, kv_fp8=opts.kv_fp8,
                        fp8_inputs_once=opts.fp8_inputs_once, fp8_decode_min_batch=opts.fp8_decode_min_batch)
    return json.dumps(settings, sort_keys=True) + "\n"


def _variants(opts: BenchOptions) -> list[tuple[str, str | None, str, str]]:
    """(impl, quant scheme, artifact directory name, prefix of its kernel tables) of each InferX
    artifact a run times: the bf16 one, and the int4 one with ``opts.quant``."""
    out: list[tuple[str, str | None, str, str]] = [("inferx", None, "artifact", "")]
    if opts.quant is not None:
        name = f"artifact-{opts.quant}{'-head' if opts.quant_head else ''}"
        kind = report.quant_kind(opts.quant)
        out.append((f"inferx-{kind}", opts.quant, name, f"{kind}_"))
    return out


def _measure_inferx(shape: str, model: Any, opts: BenchOptions, workdir: Path, hooks: Hooks,
                    out: dict[str, Any], say: Callable[[str], None]) -> None:
    ckpt = workdir / "checkpoint"
    variants = _variants(opts)
    try:
        for n, (impl, quant, art_name, prefix) in enumerate(variants):
            session = _artifact_session(shape, model, opts, workdir, hooks, out, say, quant, art_name,
                                        last=n == len(variants) - 1)
            if session is not None:
                _time_session(shape, session, impl, prefix, model, opts, out, say)
    finally:
        if opts.workdir is None:
            shutil.rmtree(ckpt, ignore_errors=True)  # the model stays in memory; free the disk


def _artifact_session(shape: str, model: Any, opts: BenchOptions, workdir: Path, hooks: Hooks, out: dict[str, Any],
                      say: Callable[[str], None], quant: str | None, art_name: str, last: bool) -> Any:
    """A loaded session of one of the run's artifacts (compiled unless the kept work directory
    holds it with the same settings), or None after recording why it could not be had."""
    ckpt, art = workdir / "checkpoint", workdir / art_name
    marker = workdir / f"{art_name}.complete"
    settings = compile_settings(opts, quant)
    what = f"{report.quant_kind(quant)} ({quant}{', LM head too' if opts.quant_head else ''})" if quant else "bf16"
    suffix = f"_{quant}" if quant else ""
    try:
        kept = marker.read_text() if marker.is_file() else None
        if kept is not None and kept != settings:
            say(f"{shape}: the kept artifact was compiled with {kept.strip()}; compiling again with {settings.strip()}")
            marker.unlink()
            shutil.rmtree(art, ignore_errors=True)
        if kept != settings:
            if not is_complete(ckpt):
                clock = time.perf_counter()
                say(f"{shape}: saving the checkpoint to {ckpt}")
                save_checkpoint(model, ckpt)
                out["setup_s"]["save_checkpoint"] = time.perf_counter() - clock
            clock = time.perf_counter()
            say(f"{shape}: compiling the {what} artifact with InferX (max_batch {max(opts.batches)}, "
                f"max_seq_len {opts.max_seq_len})")
            (hooks.compile or _compile_inferx)(ckpt, art, opts, say, quant)
            marker.write_text(settings)
            out["setup_s"][f"inferx_compile{suffix}"] = time.perf_counter() - clock
        if last and opts.workdir is None:
            shutil.rmtree(ckpt, ignore_errors=True)
        clock = time.perf_counter()
        say(f"{shape}: loading the {what} artifact")
        session = hooks.load(art, opts.device) if hooks.load else _load_inferx(art, opts.device, opts.pdl)
        out["setup_s"][f"inferx_load{suffix}"] = time.perf_counter() - clock
        return session
    except Exception as e:  # noqa: BLE001 - the peers still run; the error is reported
        out["notes"].append(f"InferX {what} not measured: {_one_line(e)}")
        say(f"{shape}: InferX {what} failed: {_one_line(e)}")
        traceback.print_exc()
        return None


def _time_session(shape: str, session: Any, impl: str, prefix: str, model: Any, opts: BenchOptions,
                  out: dict[str, Any], say: Callable[[str], None]) -> None:
    """Every config of ``session`` as ``impl``, its kernel breakdowns under ``prefix``-ed keys,
    its host time per step; the session is closed after."""
    try:
        for entry, batch, seq, context in _configs(opts):
            say(f"{shape}: {impl} {entry} batch {batch} seq {seq} context {context}")
            try:
                samples = session.time_step(entry, batch, seq, context, warmup=opts.warmup, iters=opts.iters)
                out["measurements"].append(report.measurement(entry, batch, seq, context, impl, samples))
            except Exception as e:  # noqa: BLE001
                out["measurements"].append(report.measurement(entry, batch, seq, context, impl,
                                                              error=_one_line(e)))
        # The smallest decode batch's kernels, and the largest's where it differs (a prefill-only
        # run, --context '', has no decode step)
        decode_batches = sorted({min(opts.batches), max(opts.batches)}) if opts.kernels and opts.contexts else []
        for key, batch in zip(("kernels", "kernels_large")[: len(decode_batches)], decode_batches, strict=True):
            context = min(opts.contexts)
            say(f"{shape}: {impl} kernels, decode batch {batch} context {context}")
            try:
                out[prefix + key] = [dict(k) for k in session.time_kernels("decode", batch, 1, context)]
                out[f"{prefix}{key}_config"] = {"entry": "decode", "batch": batch, "seq": 1, "context": context}
            except Exception as e:  # noqa: BLE001
                out["notes"].append(f"{impl} kernel breakdown (decode batch {batch}) failed: {_one_line(e)}")
        if opts.kernels and opts.prefills:  # the longest prompt's kernels too: where prefill time goes
            seq = max(opts.prefills)
            say(f"{shape}: {impl} kernels, prefill batch 1 seq {seq}")
            try:
                out[prefix + "prefill_kernels"] = [dict(k) for k in session.time_kernels("prefill", 1, seq, seq)]
                out[prefix + "prefill_kernels_config"] = {"entry": "prefill", "batch": 1, "seq": seq, "context": seq}
            except Exception as e:  # noqa: BLE001
                out["notes"].append(f"{impl} prefill kernel breakdown failed: {_one_line(e)}")
        out[prefix + "host_ms"] = _host_ms(session, model.config.vocab_size, opts)
        out[prefix + "generate"] = _generate_ms(session, model.config.vocab_size, opts)
    finally:
        close = getattr(session, "close", None)
        if callable(close):
            close()
        del session


def _host_ms(session: Any, vocab: int, opts: BenchOptions) -> dict[str, Any] | None:
    """Host time per decode step through the public API: a 16-token prefill, then decode steps;
    the first step (graph capture) is left out."""
    import numpy as np

    try:
        rng = np.random.default_rng(opts.seed)
        session.reset()
        session.host_ms.clear()
        session.prefill(rng.integers(0, vocab, (1, 16)))
        for _ in range(opts.iters + 1):
            session.decode(rng.integers(0, vocab, (1, 1)))
        steps = list(session.host_ms)[1:]
        return {"median": statistics.median(steps), "min": min(steps), "steps": len(steps), "samples": steps}
    except Exception as e:  # noqa: BLE001 - reported in place of the numbers
        return {"error": _one_line(e)}


def _peer_impls(entry: str, opts: BenchOptions) -> list[tuple[str, str | None]]:
    """(impl, torch.compile mode or None for eager) of the plain model's runs of one config."""
    impls: list[tuple[str, str | None]] = [("eager", None)] if "eager" in opts.peers else []
    if "compile" in opts.peers:
        modes = opts.compile_modes if entry == "decode" else ("default",)
        impls += [(f"compile:{m}", m) for m in modes]
    return impls


def _measure_peers(shape: str, model: Any, opts: BenchOptions, out: dict[str, Any],
                   say: Callable[[str], None]) -> None:
    from inferx.benchmark.peers import HFPeer, PlainPeer

    plain = PlainPeer(model, opts.device)
    hf = HFPeer(model, opts.device)
    for entry, batch, seq, context in _configs(opts):
        runs = [(impl, _plain_run(plain, entry, batch, seq, context, opts, mode))
                for impl, mode in _peer_impls(entry, opts)]
        if "hf" in opts.peers:
            runs.append(("hf", _hf_run(hf, entry, batch, seq, context, opts)))
        for impl, fn in runs:
            say(f"{shape}: {impl} {entry} batch {batch} seq {seq} context {context}")
            clock = time.perf_counter()
            try:
                samples = fn()
                extra: dict[str, Any] = {"wall_s": time.perf_counter() - clock}
                if impl == "hf" and entry == "decode":
                    extra["cache"] = hf.cache_kind
                out["measurements"].append(report.measurement(entry, batch, seq, context, impl, samples, **extra))
            except Exception as e:  # noqa: BLE001 - recorded; the other measurements go on
                say(f"{shape}: {impl} failed: {_one_line(e)}")
                out["measurements"].append(report.measurement(entry, batch, seq, context, impl, error=_one_line(e)))
                _free(opts.device)
    if "compile" in opts.peers:
        out["notes"].append(f"torch.compile modes: decode {', '.join(opts.compile_modes)}; prefill default; "
                            "batch and cache length marked dynamic (one compilation for batch 1, one for larger)")
    if "hf" in opts.peers:
        out["notes"].append(f"HF decode cache: {hf.cache_kind or 'not run'}")
    plain.model.free_cache()
    del plain, hf
    _free(opts.device, compiled=True)


def _plain_run(plain: Any, entry: str, batch: int, seq: int, context: int, opts: BenchOptions,
               mode: str | None) -> Callable[[], list[float]]:
    if entry == "decode":
        return lambda: plain.decode(batch, context, opts.warmup, opts.iters, mode)
    return lambda: plain.prefill(batch, seq, opts.warmup, opts.iters, mode, last=entry == "prefill_last")


def _hf_run(hf: Any, entry: str, batch: int, seq: int, context: int, opts: BenchOptions) -> Callable[[], list[float]]:
    if entry == "decode":
        return lambda: hf.decode(batch, context, opts.warmup, opts.iters)
    return lambda: hf.prefill(batch, seq, opts.warmup, opts.iters, last=entry == "prefill_last")


def _free(device: str, compiled: bool = False) -> None:
    """Returns freed memory to the device; ``compiled`` also drops torch.compile's code and graphs."""
    import torch

    if compiled:
        torch._dynamo.reset()
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    return x
