"""The generation and serving commands: ``inferx run``, ``inferx serve`` and ``inferx
bench-serve`` (registered on ``inferx.cli.main``)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from inferx.cli_common import UserError, _check_output_file, _runtime_errors, _user_errors, main

# Session options by device: CUDA sessions leave the logits on the GPU (tensors), where each
# step's tokens are drawn and only they cross to the host (runtime.draw)
DEVICE_LOGITS: dict[str, dict[str, Any]] = {"cuda": {"outputs": "torch"}}

# --- run ------------------------------------------------------------------------------------


@main.command("run")
@click.argument("artifact")
@click.option(
    "--prompt-ids",
    "prompt_ids",
    multiple=True,
    metavar="IDS",
    help="Comma-separated token ids, e.g. 1,2,3; repeat for a batch.",
)
@click.option(
    "--prompt",
    "prompts",
    multiple=True,
    metavar="TEXT",
    help="Text, tokenized by the artifact's tokenizer; repeat for a batch.",
)
@click.option(
    "--chat",
    "chats",
    multiple=True,
    metavar="TEXT",
    help="A user's message, put in the artifact's chat template with the assistant's turn to follow; "
    "repeat for a batch.",
)
@click.option("--system", default=None, metavar="TEXT", help="With --chat, a system message first.")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--temperature", type=float, default=0.0, show_default=True, help="0: greedy; else sampled.")
@click.option("--top-k", type=int, default=0, show_default=True, help="Sample among the k most likely (0: off).")
@click.option("--top-p", type=float, default=1.0, show_default=True, help="Nucleus sampling (1: off).")
@click.option("--min-p", type=float, default=0.0, show_default=True,
              help="Drop tokens under this fraction of the most likely's probability (0: off).")
@click.option("--repetition-penalty", type=float, default=1.0, show_default=True, help="1: off.")
@click.option("--seed", type=int, default=None,
              help="Seed of the draws (sequence i draws from seed + i); printed when not given.")
@click.option("--logprobs", is_flag=True, help="Print each generated token's log-probability too.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def run_command(
    artifact: str,
    prompt_ids: tuple[str, ...],
    prompts: tuple[str, ...],
    chats: tuple[str, ...],
    system: str | None,
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
    min_p: float,
    repetition_penalty: float,
    seed: int | None,
    logprobs: bool,
    device: str,
    as_json: bool,
) -> None:
    """Generation from ARTIFACT (greedy unless --temperature is above 0): prints the generated
    token ids, and their text where the artifact carries a tokenizer."""
    from inferx.runtime.artifact import load_artifact
    from inferx.runtime.loaded import load
    from inferx.runtime.manifest import Manifest
    from inferx.runtime.sampling import SamplingError, SamplingParams

    try:
        sampling = SamplingParams(temperature, top_k, top_p, min_p, repetition_penalty, seed)
    except SamplingError as e:
        raise UserError(f"--{str(e.param).replace('_', '-')}: {e}") from None
    if not sampling.greedy and seed is None:
        sampling = sampling.seeded()
        click.echo(f"seed {sampling.seed} (--seed {sampling.seed} draws the same tokens again)", err=True)

    if sum(map(bool, (prompt_ids, prompts, chats))) != 1:
        raise UserError("give the prompt as --prompt-ids 1,2,3, as --prompt TEXT or as --chat TEXT (one of the three)")
    if system is not None and not chats:
        raise UserError("--system is the system message of a --chat prompt: give --chat TEXT")
    rows = [_token_ids(text) for text in prompt_ids]
    errors = _runtime_errors()
    clock = time.perf_counter()
    with _user_errors(errors):
        art = load_artifact(artifact, verify="structure")
        names = list(Manifest.from_sections(art.manifest, art.path).tokenizer.files)
        if (prompts or chats) and not names:
            given = "--prompt" if prompts else "--chat"
            raise UserError(f"{artifact}: the artifact carries no tokenizer: give --prompt-ids instead of {given}")
        # before transformers can import Triton (see runtime.loaded)
        session = load(artifact, device, **DEVICE_LOGITS.get(device, {}))
        tokenizer = _load_tokenizer(art) if names else None
        if tokenizer is not None and prompts:
            rows = [list(tokenizer(text)["input_ids"]) for text in prompts]
        if tokenizer is not None and chats:
            rows = [_chat_ids(tokenizer, text, system, artifact) for text in chats]
        click.echo(f"loaded {artifact} ({device}) in {time.perf_counter() - clock:.1f} s", err=True)
        clock = time.perf_counter()
        out = session.generate(rows, max_new_tokens, sampling=sampling, logprobs=logprobs)
    generated, lps = out if logprobs else (out, None)
    eos = set(session.info.eos_token_ids)
    results = []
    for i, (prompt, row) in enumerate(zip(rows, generated.tolist(), strict=True)):
        tokens = _until_eos(row, eos)
        entry: dict[str, Any] = {"prompt_ids": prompt, "tokens": tokens}
        if lps is not None:
            entry["logprobs"] = [round(float(v), 6) for v in lps[i, : len(tokens)]]
        if tokenizer is not None:
            entry["text"] = tokenizer.decode(tokens, skip_special_tokens=True)
        results.append(entry)
    click.echo(
        f"generated {sum(len(r['tokens']) for r in results)} tokens in {time.perf_counter() - clock:.1f} s", err=True
    )
    if as_json:
        click.echo(json.dumps(results, indent=2))
        return
    for i, r in enumerate(results):
        tag = f"[{i}] " if len(results) > 1 else ""
        click.echo(f"{tag}tokens: {' '.join(map(str, r['tokens']))}")
        if "logprobs" in r:
            click.echo(f"{tag}logprobs: {' '.join(f'{v:.4f}' for v in r['logprobs'])}")
        if "text" in r:
            click.echo(f"{tag}text: {r['text']!r}")


def _chat_ids(tokenizer: Any, text: str, system: str | None, artifact: str) -> list[int]:
    """The token ids of a conversation of ``system`` (where given) and the user's ``text``, with
    the assistant's turn opened (``serve.text.chat_ids``)."""
    from inferx.serve.text import TextError, chat_ids

    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": text}]
    try:
        return chat_ids(tokenizer, messages)
    except TextError as e:
        hint = ": give --prompt TEXT instead of --chat" if "no chat template" in str(e) else ""
        raise UserError(f"{artifact}: {e}{hint}") from None


def _token_ids(text: str) -> list[int]:
    ids = []
    for part in text.replace(" ", "").split(","):
        if not part.isdigit():
            raise UserError(f"--prompt-ids {text!r}: {part!r} is not a token id (want e.g. 1,2,3)")
        ids.append(int(part))
    return ids


def _until_eos(row: list[int], eos: set[int]) -> list[int]:
    """The row up to and including its first EOS (generate repeats it after that)."""
    for i, t in enumerate(row):
        if t in eos:
            return row[: i + 1]
    return row


def _load_tokenizer(art: Any) -> Any:
    """The artifact's tokenizer (``serve.text.artifact_tokenizer``), or None."""
    from inferx.serve.text import TextError, artifact_tokenizer

    try:
        return artifact_tokenizer(art)
    except TextError as e:
        raise UserError(str(e)) from None


# --- serve ----------------------------------------------------------------------------------


@main.command("serve")
@click.argument("artifact")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cuda", show_default=True)
@click.option("--rows", type=click.IntRange(min=1), default=None,
              help="Requests running at once (default: the artifact's --max-batch).")
@click.option("--prefill-chunk", type=click.IntRange(min=1), default=None,
              help="Prompt tokens a request prefills a step (default: whole prompts).")
@click.option("--model-name", default=None, help="The model's name in the API (default: the artifact's file name).")
@click.option("--shutdown-timeout", type=click.IntRange(min=0), default=30, show_default=True,
              help="Seconds in-flight requests get to finish once asked to stop (Ctrl-C, SIGTERM); then cancelled.")
def serve_command(artifact: str, host: str, port: int, device: str, rows: int | None, prefill_chunk: int | None,
                  model_name: str | None, shutdown_timeout: int) -> None:
    """Serve ARTIFACT over an OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions,
    /v1/models, /health, /metrics), batching requests as they come. Needs the artifact's
    tokenizer and the serve extra (pip install 'inferx[serve]')."""
    try:
        import uvicorn

        from inferx.serve.app import build_app
    except ImportError as e:
        raise UserError(f"inferx serve needs the serve extra (pip install 'inferx[serve]'): {e}") from None
    from inferx.runtime.artifact import load_artifact
    from inferx.runtime.loaded import load

    with _user_errors(_runtime_errors()):
        art = load_artifact(artifact, verify="structure")
        # before transformers can import Triton (see runtime.loaded)
        session = load(artifact, device, **DEVICE_LOGITS.get(device, {}))
        if rows is not None and rows > session.max_batch:
            raise UserError(f"--rows {rows}: the artifact runs at most {session.max_batch} sequences (--max-batch)")
        tokenizer = _load_tokenizer(art)
        if tokenizer is None:
            raise UserError(f"{artifact}: the artifact carries no tokenizer, which the HTTP API needs for its text")
        app = build_app(session, tokenizer, model_name or Path(artifact).name, rows, prefill_chunk)
    click.echo(f"serving {artifact} ({device}) on http://{host}:{port}/v1", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=shutdown_timeout)


# --- bench-serve ----------------------------------------------------------------------------


def _length_range(text: str, option: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(":")
    try:
        a, b = int(lo), int(hi if sep else lo)
    except ValueError:
        raise UserError(f"{option} {text!r}: want LOW:HIGH or N, e.g. 128:512") from None
    if not 1 <= a <= b:
        raise UserError(f"{option} {text!r}: want 1 <= LOW <= HIGH")
    return a, b


@main.command("bench-serve")
@click.option("--shape", type=click.Choice(["1b", "8b"]), default="8b", show_default=True)
@click.option("--requests", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--rate", default="inf", show_default=True,
              help="Poisson arrivals, requests a second (inf: all at once).")
@click.option("--prompt-len", default="128:512", show_default=True, help="Prompt lengths LOW:HIGH (uniform).")
@click.option("--output-len", default="128:128", show_default=True, help="Output lengths LOW:HIGH (uniform).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rows", type=click.IntRange(min=1), default=64, show_default=True, help="Requests running at once.")
@click.option("--prefill-chunk", type=click.IntRange(min=1), default=None,
              help="Prompt tokens a request prefills a step.")
@click.option("--shared-prefix", type=click.IntRange(min=0), default=0, show_default=True,
              help="Tokens every prompt starts with (a system prompt): a paged cache shares their blocks.")
@click.option("--kv-block-size", type=click.IntRange(min=1), default=None, metavar="B",
              help="Compile with a paged KV cache of B-position blocks (default: contiguous rows).")
@click.option("--peers", default="generate_batch", show_default=True, help="generate_batch, or '' for none.")
@click.option("--workdir", default=None, help="Where the checkpoint and artifact go (default: a temporary directory).")
@click.option("--out", default=None, help="Write the results as JSON here.")
def bench_serve_command(shape: str, requests: int, rate: str, prompt_len: str, output_len: str, seed: int, rows: int,
                        prefill_chunk: int | None, shared_prefix: int, kv_block_size: int | None, peers: str,
                        workdir: str | None, out: str | None) -> None:
    """A load of requests through InferX's serving engine and through transformers' continuous
    batching (generate_batch) in the same process, on a Llama shape with random bf16 weights on
    the GPU: throughput, TTFT and TPOT percentiles."""
    import torch

    from inferx.benchmark.serve_load import Load, bench_serve, table
    from inferx.benchmark.shapes import make_model

    if out is not None:
        _check_output_file(out, "--out")
    try:
        per_s = float(rate)
    except ValueError:
        raise UserError(f"--rate {rate!r}: want a number of requests a second, or inf") from None
    try:
        load = Load(requests, per_s, _length_range(prompt_len, "--prompt-len"),
                    _length_range(output_len, "--output-len"), seed, shared_prefix)
    except ValueError as e:
        flag = f"--shared-prefix {shared_prefix}" if "shared prefix" in str(e) else f"--rate {rate}"
        raise UserError(f"{flag}: {e}") from None
    if not torch.cuda.is_available():
        raise UserError("bench-serve times the GPU: no CUDA device here")
    names = tuple(p for p in peers.split(",") if p.strip())

    def say(line: str) -> None:
        click.echo(line, err=True)

    with tempfile.TemporaryDirectory(prefix="inferx-bench-serve-") as tmp:
        model = make_model(shape, "cuda", torch.bfloat16, seed)
        with _user_errors(_runtime_errors() + (ValueError,)):
            result = bench_serve(model, Path(workdir or tmp), load, rows=rows, prefill_chunk=prefill_chunk,
                                 peers=names, kv_block_size=kv_block_size, say=say)
    result["shape"] = shape
    click.echo(table(result))
    if out is not None:
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
