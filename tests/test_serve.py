"""``inferx serve``: the real OpenAI client against the HTTP API on 127.0.0.1, over a CPU artifact
(Triton's interpreter, a paged KV cache) with a word-level tokenizer and chat template:
completions, chat, streams, stop strings, bad requests (400 naming the field), a stream the client
closes (its request cancelled, its row free again), and the metrics."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
import uvicorn
from test_cli import _word_tokenizer

import inferx
from inferx.serve.app import build_app
from inferx.serve.text import TextStream

MODEL = "tiny"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, object, object]]:
    import torch
    import transformers as T

    torch.manual_seed(0)
    cfg = T.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    program = inferx.import_model(T.LlamaForCausalLM(cfg).eval())
    program.tokenizer = _word_tokenizer(chat=True)
    # a paged KV cache (blocks of 4 positions): what a server would compile
    art = inferx.compile(program, target="cpu", output=tmp_path_factory.mktemp("serve") / "a.ixa", dtype="fp32",
                         max_seq_len=32, max_batch=2, kv_block_size=4)
    app = build_app(inferx.load(art, device="cpu"), program.tokenizer, MODEL)
    base, server, thread = start(app)
    alone = inferx.load(art, device="cpu")
    try:
        yield base, alone, app, (art, program.tokenizer)
    finally:
        server.should_exit = True
        thread.join(timeout=60)


def start(app, **config) -> tuple[str, uvicorn.Server, threading.Thread]:  # type: ignore[no-untyped-def]
    """``app`` under uvicorn on a free port of 127.0.0.1, started."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 60
    while not server.started:
        assert time.time() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def client(base: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=120)


def words(ids: list[int]) -> str:
    return " ".join(f"w{i}" for i in ids)


def test_completion_and_chat_give_the_greedy_tokens(served) -> None:  # type: ignore[no-untyped-def]
    base, alone, _, _ = served
    c = client(base)
    assert [m.id for m in c.models.list().data] == [MODEL]
    want = alone.generate([[1, 5, 7]], 5, stop_at_eos=False)[0].tolist()
    out = c.completions.create(model=MODEL, prompt="w1 w5 w7", max_tokens=5, temperature=0)
    got = out.choices[0].text
    # the reply stops at the model's EOS (w2) if drawn
    end = want.index(2) + 1 if 2 in want else len(want)
    assert got == words([t for t in want[:end] if t != 2]), (got, want)
    assert out.usage.prompt_tokens == 3 and out.usage.completion_tokens == end
    assert out.choices[0].finish_reason == ("stop" if 2 in want else "length")
    chat = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "w9 w3"}], max_tokens=4,
                                     temperature=0)
    ids = alone.generate([[4, 9, 3, 5, 6]], 4, stop_at_eos=False)[0].tolist()  # the template: w4 ... w5 w6
    end = ids.index(2) + 1 if 2 in ids else len(ids)
    assert chat.choices[0].message.role == "assistant"
    assert chat.choices[0].message.content == words([t for t in ids[:end] if t != 2])


def test_streams_and_stop_strings(served) -> None:  # type: ignore[no-untyped-def]
    base, alone, _, _ = served
    c = client(base)
    want = alone.generate([[1, 5, 7]], 6, stop_at_eos=False)[0].tolist()
    chunks = list(c.completions.create(model=MODEL, prompt="w1 w5 w7", max_tokens=6, temperature=0, stream=True))
    text = "".join(ch.choices[0].text for ch in chunks)
    whole = c.completions.create(model=MODEL, prompt="w1 w5 w7", max_tokens=6, temperature=0).choices[0].text
    assert text == whole and chunks[-1].choices[0].finish_reason in ("stop", "length")
    deltas = list(c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "w9"}], max_tokens=3,
                                            temperature=0, stream=True))
    assert deltas[0].choices[0].delta.role == "assistant" and deltas[-1].choices[0].finish_reason is not None
    assert 2 not in want[:3], want  # no EOS early: the stop string below is met first
    second = f"w{want[1]}"  # stop at the second generated word: the text is the first alone
    out = c.completions.create(model=MODEL, prompt="w1 w5 w7", max_tokens=6, temperature=0, stop=[second])
    first = whole.split(second)[0]
    assert out.choices[0].text == first and out.choices[0].finish_reason == "stop"


@pytest.mark.thorough  # seeded draws repeating: tests/test_engine.py and tests/test_sampling.py in CI
def test_seeded_requests_repeat(served) -> None:  # type: ignore[no-untyped-def]
    base, _, _, _ = served
    c = client(base)
    texts = [c.completions.create(model=MODEL, prompt="w1 w2 w3", max_tokens=6, temperature=1.0, seed=11)
             .choices[0].text for _ in range(2)]
    assert texts[0] == texts[1]


def test_bad_requests_are_400_naming_the_field(served) -> None:  # type: ignore[no-untyped-def]
    base, _, _, _ = served
    c = client(base)
    cases = [
        (dict(prompt="w1", temperature=-1), "temperature"),
        (dict(prompt="w1", max_tokens=0), "max_tokens"),
        (dict(prompt=[1, 500]), "prompt"),
        (dict(prompt="w1", max_tokens=40), "context"),
        (dict(prompt="w1", stop=["a", "b", "c", "d", "e"]), "stop"),
        (dict(prompt="w1", extra_body={"priority": "high"}), "priority"),
    ]
    for kwargs, name in cases:
        with pytest.raises(openai.BadRequestError) as e:
            c.completions.create(model=MODEL, **kwargs)  # type: ignore[call-overload]
        assert name in str(e.value), (kwargs, str(e.value))
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.completions.create(model="other", prompt="w1")
    r = httpx.post(f"{base}/v1/chat/completions", content=b"{not json", timeout=30)
    assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
    r = httpx.post(f"{base}/v1/chat/completions", json={"messages": [{"role": "robot", "content": "x"}]}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"


def test_a_closed_stream_cancels_its_request(served) -> None:  # type: ignore[no-untyped-def]
    base, _, app, _ = served
    loop = app.state.engine_loop
    before = loop.finished["cancelled"]
    with httpx.stream("POST", f"{base}/v1/completions", timeout=60,
                      json={"model": MODEL, "prompt": "w1 w5", "max_tokens": 25, "temperature": 0,
                            "stream": True, "stop": []}) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                break  # the first token's chunk: then the client goes away
    deadline = time.time() + 60
    while loop.finished["cancelled"] == before or not loop.engine.idle():
        assert time.time() < deadline, "the request was not cancelled"
        time.sleep(0.1)
    assert loop.engine.free_rows == 2
    metrics = httpx.get(f"{base}/metrics", timeout=30).text
    assert 'inferx_requests_total{finish="cancelled"}' in metrics and "inferx_free_rows 2" in metrics
    assert "inferx_preemptions_total 0" in metrics
    assert "inferx_kv_blocks 16" in metrics and "inferx_kv_blocks_used " in metrics
    assert "inferx_time_to_first_token_seconds_count" in metrics
    assert httpx.get(f"{base}/health", timeout=30).json() == {"status": "ok"}


def test_text_holds_back_what_may_become_a_stop_string() -> None:
    class Chars:  # one character a token
        def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
            return "".join(chr(i) for i in ids)

    t = TextStream(Chars(), ["END"])
    shown = [t.add(ord(ch), False) for ch in "abEN"]
    assert "".join(s for s, _ in shown) == "ab" and not any(stop for _, stop in shown)
    assert t.add(ord("D"), False) == ("", True) and t.text == "ab"
    t = TextStream(Chars(), ["END"])
    assert "".join(t.add(ord(ch), False)[0] for ch in "xE") == "x" and t.add(ord("y"), True) == ("Ey", False)


def test_shutdown_cancels_what_outlives_its_grace(served) -> None:  # type: ignore[no-untyped-def]
    """Asked to stop, the server gives in-flight requests its graceful timeout, then cancels them:
    the open stream ends, its request is cancelled in the engine, and the server exits."""
    _, _, _, (art, tokenizer) = served
    app = build_app(inferx.load(art, device="cpu"), tokenizer, MODEL)
    base, server, thread = start(app, timeout_graceful_shutdown=1)
    loop = app.state.engine_loop
    seen: list[str] = []

    def read() -> None:
        try:
            with httpx.stream("POST", f"{base}/v1/completions", timeout=120,
                              json={"prompt": "w1 w5", "max_tokens": 30, "temperature": 0, "stream": True}) as r:
                for line in r.iter_lines():
                    seen.append(line)
        except httpx.HTTPError:
            seen.append("cut")

    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.time() + 60
    while not any(line.startswith("data: {") for line in seen):
        assert time.time() < deadline, "no first token"
        time.sleep(0.05)
    server.should_exit = True
    thread.join(timeout=60)
    reader.join(timeout=60)
    assert not thread.is_alive() and not reader.is_alive()
    assert loop.engine.idle() and loop.engine.free_rows == 2 and not loop.thread.is_alive()
    assert loop.finished["cancelled"] == 1, loop.finished
