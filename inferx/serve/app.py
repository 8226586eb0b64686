"""The OpenAI-compatible HTTP API over an engine (``inferx.runtime.engine``), on Starlette (ASGI;
``inferx serve`` runs it under uvicorn).

Routes: ``POST /v1/completions`` and ``POST /v1/chat/completions`` (whole responses, or streamed
as server-sent events with ``"stream": true``; beside OpenAI's fields, ``top_k``, ``min_p``,
``repetition_penalty`` and ``priority``: a higher one runs first and may preempt a lower one),
``GET /v1/models``, ``GET /health`` and ``GET /metrics`` (Prometheus text: queue depth, running
requests, free rows, requests by how they ended, time to first token and time per output token
as histograms).

The engine steps on a thread of its own (``EngineLoop``); a request's events reach its handler
through an asyncio queue. A request the server cannot take is a 400 (404 for another model)
with an OpenAI-style error naming the field at fault. A client that goes away (a closed stream)
cancels its request, and its rows are free at the next step; shutting down (once uvicorn's
graceful timeout has passed) cancels whatever still runs and ends its streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from inferx.runtime.engine import Engine, Event
from inferx.runtime.sampling import SamplingError, SamplingParams
from inferx.runtime.session import SessionError
from inferx.serve.text import TextError, TextStream, chat_ids

# Histogram bounds, seconds
TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
TPOT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)
MAX_STOPS = 4


class BadRequest(ValueError):
    """A request the server cannot take: HTTP ``status``, the field at fault (``param``)."""

    def __init__(self, message: str, param: str | None = None, status: int = 400):
        super().__init__(message)
        self.param, self.status = param, status


@dataclass
class Histogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, v: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.bounds)
        for i, b in enumerate(self.bounds):
            if v <= b:
                self.counts[i] += 1
        self.total += v
        self.n += 1

    def lines(self, name: str) -> list[str]:
        counts = self.counts or [0] * len(self.bounds)
        out = [f'{name}_bucket{{le="{b}"}} {c}' for b, c in zip(self.bounds, counts, strict=True)]
        return out + [f'{name}_bucket{{le="+Inf"}} {self.n}', f"{name}_sum {self.total:.6f}", f"{name}_count {self.n}"]


class EngineLoop:
    """The engine on a thread of its own: ``submit`` and ``cancel`` from any thread (they wait
    for the step under way), events handed to each request's ``sink`` after every step."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.lock = threading.Condition()
        self.sinks: dict[int, Callable[[Event], None]] = {}
        self.started: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.finished: dict[str, int] = {r: 0 for r in ("stop", "length", "cancelled")}
        self.ttft, self.tpot = Histogram(TTFT_BUCKETS), Histogram(TPOT_BUCKETS)
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="inferx-engine", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submit(self, sink: Callable[[Event], None], job: Job) -> int:
        with self.lock:
            if self.stopping:
                raise BadRequest("the server is shutting down", status=503)
            rid = self.engine.submit(job.prompt, job.max_tokens, sampling=job.sampling, logprobs=job.logprobs,
                                     priority=job.priority)
            self.sinks[rid] = sink
            self.started[rid] = time.perf_counter()
            self.lock.notify()
            return rid

    def cancel(self, rid: int) -> None:
        with self.lock:
            if self.engine.cancel(rid):
                self.lock.notify()

    def stop(self) -> None:
        """Cancels every request and ends the thread once their events are out."""
        with self.lock:
            self.stopping = True
            for rid in list(self.sinks):
                self.engine.cancel(rid)
            self.lock.notify()
        self.thread.join(timeout=60)

    def _run(self) -> None:
        while True:
            with self.lock:
                while self.engine.idle() and not self.stopping:
                    self.lock.wait()
                if self.engine.idle():
                    return
                events = self.engine.step()
                now = time.perf_counter()
                out = []
                for ev in events:
                    out.append((self.sinks[ev.request], ev))
                    if ev.token is not None:
                        before = self.last.get(ev.request)
                        if before is None:
                            self.ttft.observe(now - self.started[ev.request])
                        else:
                            self.tpot.observe(now - before)
                        self.last[ev.request] = now
                    if ev.finished is not None:
                        self.finished[ev.finished] += 1
                        for d in (self.sinks, self.started, self.last):
                            d.pop(ev.request, None)
            for sink, ev in out:
                sink(ev)

    def metrics(self) -> str:
        with self.lock:
            e = self.engine
            lines = [
                "# TYPE inferx_queue_depth gauge", f"inferx_queue_depth {e.waiting}",
                "# TYPE inferx_running_requests gauge", f"inferx_running_requests {e.running}",
                "# TYPE inferx_free_rows gauge", f"inferx_free_rows {e.free_rows}",
                "# TYPE inferx_engine_steps_total counter", f"inferx_engine_steps_total {e.steps}",
                "# TYPE inferx_preemptions_total counter", f"inferx_preemptions_total {e.preemptions}",
                *(() if e.pool is None else (
                    "# TYPE inferx_kv_blocks gauge", f"inferx_kv_blocks {e.pool.paging.blocks}",
                    "# TYPE inferx_kv_blocks_used gauge", f"inferx_kv_blocks_used {e.pool.held}",
                    "# TYPE inferx_kv_blocks_cached gauge", f"inferx_kv_blocks_cached {e.cached_blocks}",
                    "# TYPE inferx_kv_shared_blocks_total counter",
                    f"inferx_kv_shared_blocks_total {e.shared_blocks}")),
                "# TYPE inferx_requests_total counter",
                *(f'inferx_requests_total{{finish="{k}"}} {v}' for k, v in self.finished.items()),
                "# TYPE inferx_time_to_first_token_seconds histogram",
                *self.ttft.lines("inferx_time_to_first_token_seconds"),
                "# TYPE inferx_time_per_output_token_seconds histogram",
                *self.tpot.lines("inferx_time_per_output_token_seconds"),
            ]
        return "\n".join(lines) + "\n"


@dataclass
class Job:
    """One parsed request: its prompt ids and how to generate."""

    prompt: list[int]
    max_tokens: int
    sampling: SamplingParams | None
    stops: list[str]
    stream: bool
    logprobs: bool
    chat: bool
    priority: int = 0


def build_app(session: Any, tokenizer: Any, model_name: str, rows: int | None = None,
              prefill_chunk: int | None = None) -> Starlette:
    """The ASGI app serving ``session`` (its engine started on startup, stopped on shutdown;
    ``rows`` and ``prefill_chunk`` as ``Engine`` takes them)."""
    loop = EngineLoop(Engine(session, rows, prefill_chunk))
    vocab = session.info.vocab_size
    ids = {"n": 0}

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                                         "owned_by": "inferx"}]})

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(loop.metrics(), media_type="text/plain; version=0.0.4")

    async def completions(request: Request) -> Response:
        return await _serve(request, chat=False)

    async def chat_completions(request: Request) -> Response:
        return await _serve(request, chat=True)

    async def _serve(request: Request, chat: bool) -> Response:
        try:
            job = _parse(await _body(request), chat, tokenizer, vocab, model_name)
            events: asyncio.Queue[Event] = asyncio.Queue()
            aio = asyncio.get_running_loop()
            def sink(ev: Event) -> None:
                aio.call_soon_threadsafe(events.put_nowait, ev)

            rid = await asyncio.to_thread(loop.submit, sink, job)
        except BadRequest as e:
            return _error(str(e), e.param, e.status)
        except SessionError as e:
            return _error(str(e), None, 400)
        ids["n"] += 1
        name = f"{'chatcmpl' if chat else 'cmpl'}-{ids['n']}"
        text = TextStream(tokenizer, job.stops)
        if job.stream:
            return StreamingResponse(_chunks(name, job, rid, events, text), media_type="text/event-stream")
        try:
            body = await _whole(name, job, rid, events, text)
        except asyncio.CancelledError:  # the client went away
            _cancel_later(rid)
            raise
        return JSONResponse(body)

    def _cancel_later(rid: int) -> None:
        """Cancels ``rid`` from a worker thread, not awaited: in a cancelled task every await
        would raise again before the cancel ran."""
        asyncio.get_running_loop().run_in_executor(None, loop.cancel, rid)

    async def _tokens(rid: int, events: asyncio.Queue[Event], text: TextStream
                      ) -> AsyncIterator[tuple[str, Event, str | None]]:
        """(text to show, the event, finish reason or None) of each event; a stop string cancels
        the request and ends the text with "stop"."""
        while True:
            ev = await events.get()
            if ev.finished == "cancelled" and ev.token is None:
                yield text.add(None, True)[0], ev, "cancelled"
                return
            shown, stopped = text.add(ev.token, ev.finished is not None)
            if stopped:
                await asyncio.to_thread(loop.cancel, rid)
                yield shown, ev, "stop"
                return
            yield shown, ev, ev.finished
            if ev.finished is not None:
                return

    async def _whole(name: str, job: Job, rid: int, events: asyncio.Queue[Event], text: TextStream) -> dict:
        tokens, lps, parts = [], [], []
        reason: str | None = None
        async for shown, ev, why in _tokens(rid, events, text):
            parts.append(shown)
            reason = why
            if ev.token is not None:
                tokens.append(ev.token)
                lps.append(ev.logprob)
        content = "".join(parts)
        reason = "stop" if reason == "cancelled" else reason
        choice: dict[str, Any] = {"index": 0, "finish_reason": reason, "logprobs": None}
        if job.logprobs:
            choice["logprobs"] = _logprobs(tokenizer, tokens, lps, job.chat)
        if job.chat:
            choice["message"] = {"role": "assistant", "content": content}
        else:
            choice["text"] = content
        return {"id": name, "object": "chat.completion" if job.chat else "text_completion",
                "created": int(time.time()), "model": model_name, "choices": [choice],
                "usage": {"prompt_tokens": len(job.prompt), "completion_tokens": len(tokens),
                          "total_tokens": len(job.prompt) + len(tokens)}}

    async def _chunks(name: str, job: Job, rid: int, events: asyncio.Queue[Event], text: TextStream
                      ) -> AsyncIterator[str]:
        created = int(time.time())
        kind = "chat.completion.chunk" if job.chat else "text_completion"

        def chunk(piece: str | None, reason: str | None, first: bool = False) -> str:
            choice: dict[str, Any] = {"index": 0, "finish_reason": reason, "logprobs": None}
            if job.chat:
                choice["delta"] = ({"role": "assistant"} if first else {}) | ({"content": piece} if piece else {})
            else:
                choice["text"] = piece or ""
            return "data: " + json.dumps({"id": name, "object": kind, "created": created, "model": model_name,
                                          "choices": [choice]}) + "\n\n"

        done = False
        try:
            if job.chat:
                yield chunk(None, None, first=True)
            async for shown, _, reason in _tokens(rid, events, text):
                if reason is not None:
                    done = True
                    yield chunk(shown, "stop" if reason == "cancelled" else reason)
                elif shown:
                    yield chunk(shown, None)
            yield "data: [DONE]\n\n"
        finally:
            if not done:  # the client went away: its request ends, its rows are free
                _cancel_later(rid)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop.start()
        try:
            yield
        finally:
            await asyncio.to_thread(loop.stop)

    app = Starlette(routes=[
        Route("/health", health), Route("/metrics", metrics), Route("/v1/models", models),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ], lifespan=lifespan)
    app.state.engine_loop = loop
    return app


async def _body(request: Request) -> dict:
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _error(message: str, param: str | None, status: int) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": None}}, status)


def _number(body: dict, key: str, default: Any) -> Any:
    v = body.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BadRequest(f"{key} must be a number, got {json.dumps(v)}", key)
    return v


def _parse(body: dict, chat: bool, tokenizer: Any, vocab: int, model_name: str) -> Job:
    """The job a request body asks for; BadRequest naming the field at fault."""
    model = body.get("model")
    if model is not None and model != model_name:
        raise BadRequest(f"model {json.dumps(model)} does not exist; this server serves {json.dumps(model_name)}",
                         "model", 404)
    if body.get("n", 1) != 1:
        raise BadRequest(f"n must be 1 (one choice a request), got {json.dumps(body.get('n'))}", "n")
    if chat:
        prompt = _chat_prompt(body.get("messages"), tokenizer)
    else:
        prompt = _text_prompt(body.get("prompt"), tokenizer, vocab)
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    max_tokens = body.get(key, 16) if body.get(key) is not None else 16
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"{key} must be a whole number >= 1, got {json.dumps(max_tokens)}", key)
    try:
        sampling = SamplingParams(
            temperature=_number(body, "temperature", 1.0), top_k=_number(body, "top_k", 0),
            top_p=_number(body, "top_p", 1.0), min_p=_number(body, "min_p", 0.0),
            repetition_penalty=_number(body, "repetition_penalty", 1.0), seed=body.get("seed"))
    except SamplingError as e:
        raise BadRequest(str(e), e.param) from None
    stop = body.get("stop")
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > MAX_STOPS or not all(isinstance(s, str) for s in stops):
        raise BadRequest(f"stop must be a string or a list of at most {MAX_STOPS} strings, got {json.dumps(stop)}",
                         "stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest(f"stream must be true or false, got {json.dumps(stream)}", "stream")
    logprobs = body.get("logprobs")
    if logprobs is not None and not isinstance(logprobs, (bool, int)):
        raise BadRequest(f"logprobs must be a boolean or a number, got {json.dumps(logprobs)}", "logprobs")
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise BadRequest(f"priority must be a whole number (higher runs first), got {json.dumps(priority)}",
                         "priority")
    return Job(prompt, max_tokens, None if sampling.greedy else sampling, stops, stream, bool(logprobs), chat,
               priority)


def _text_prompt(prompt: Any, tokenizer: Any, vocab: int) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise BadRequest("prompt is empty", "prompt")
        ids = list(tokenizer(prompt)["input_ids"])
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        ids = prompt
    else:
        raise BadRequest("prompt must be a non-empty string or a non-empty list of token ids", "prompt")
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise BadRequest(f"prompt holds {bad[0]}, not a token id in [0, {vocab})", "prompt")
    return ids


def _chat_prompt(messages: Any, tokenizer: Any) -> list[int]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages must be a non-empty list of {role, content} objects", "messages")
    clean = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant") \
                or not isinstance(m.get("content"), str):
            raise BadRequest(f"messages[{i}] must be {{role: system|user|assistant, content: string}}, "
                             f"got {json.dumps(m)[:200]}", "messages")
        clean.append({"role": m["role"], "content": m["content"]})
    try:
        return chat_ids(tokenizer, clean)
    except TextError as e:
        raise BadRequest(f"this model's chat: {e}", "messages") from None


def _logprobs(tokenizer: Any, tokens: list[int], lps: list[float], chat: bool) -> dict:
    pieces = [tokenizer.decode([t]) for t in tokens]
    if chat:
        return {"content": [{"token": p, "logprob": lp, "bytes": list(p.encode()), "top_logprobs": []}
                            for p, lp in zip(pieces, lps, strict=True)]}
    return {"tokens": pieces, "token_logprobs": lps, "top_logprobs": None, "text_offset": None}
