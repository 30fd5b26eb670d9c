"""A hostile model provider on a loopback socket, from Python (issue 12, item 6): a 32 MB SSE line, a
Chat Completions tool-call index of 2e9, an Anthropic content-block index of 3e9, wrong-shaped Anthropic
blocks and usage counts near 2**64 under a token budget. Each ends in a typed error (``ambit.ModelError``
with code ``model_response`` naming the limit, or ``ambit.BudgetExceeded``), never a ``RuntimeError``;
each has a negative control that the same answer within the limit is read."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

import ambit

U64_MAX = 2**64 - 1


class Hostile:
    """Answers every request on a loopback port with the bytes `body()` yields (SSE, or JSON with a
    length), then closes the connection."""

    def __init__(self, body: Any, content_type: str = "text/event-stream") -> None:
        self.body = body
        self.content_type = content_type
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.base_url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.decode("latin-1").split("\r\n"):
                if line.lower().startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            try:
                chunks = list(self.body()) if self.content_type == "application/json" else None
                header = f"HTTP/1.1 200 OK\r\ncontent-type: {self.content_type}\r\nconnection: close\r\n"
                if chunks is not None:
                    header += f"content-length: {sum(map(len, chunks))}\r\n"
                conn.sendall((header + "\r\n").encode())
                for chunk in chunks if chunks is not None else self.body():
                    conn.sendall(chunk)
            except OSError:
                pass  # The client stopped reading: what a refusal looks like from here.

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def hostile() -> Iterator[Any]:
    started: list[Hostile] = []

    def start(body: Any, content_type: str = "text/event-stream") -> Hostile:
        h = Hostile(body, content_type)
        started.append(h)
        return h

    yield start
    for h in started:
        h.close()


def sse(events: Iterable[tuple[str | None, Any]]) -> bytes:
    out = ""
    for name, data in events:
        if name:
            out += f"event: {name}\n"
        out += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
    return out.encode()


CHAT_DONE = sse([(None, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                 (None, "[DONE]")])


def run(model: ambit.Model, **agent: Any) -> ambit.RunResult:
    return ambit.Agent(model=model, **agent).run_sync("hi")


def chat(url: str, stream: bool = True) -> ambit.OpenAIChat:
    return ambit.OpenAIChat("m", base_url=url, api_key="k", stream=stream, max_retries=0)


def anthropic(url: str) -> ambit.Anthropic:
    return ambit.Anthropic("claude", base_url=url, api_key="k", stream=True, max_retries=0)


def refused(model: ambit.Model, limit: str) -> str:
    with pytest.raises(ambit.ModelError) as e:
        run(model)
    assert e.value.code == "model_response", e.value
    assert limit in str(e.value), e.value
    return str(e.value)


# ---------------------------------------------------------------------------------------------------
# One line.

LINE_HEAD = b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"'
LINE_TAIL = b'"}}]}'


def long_line(line_len: int) -> Any:
    def body() -> Iterator[bytes]:
        yield LINE_HEAD
        fill = line_len - len(LINE_HEAD) - len(LINE_TAIL)
        block = b"a" * 65536
        while fill > 0:
            yield block[:fill]
            fill -= len(block)
        yield LINE_TAIL + b"\n\n" + CHAT_DONE
    return body


def test_a_32_mb_sse_line_is_a_typed_error_naming_the_line_limit(hostile: Any) -> None:
    refused(chat(hostile(long_line(32 << 20)).base_url), "max_line_bytes")
    # The control: a line of 1 MiB is read whole.
    result = run(chat(hostile(long_line(1 << 20)).base_url))
    assert len(result.output) == (1 << 20) - len(LINE_HEAD) - len(LINE_TAIL)


# ---------------------------------------------------------------------------------------------------
# Huge indices.

def chat_calls(indices: Iterable[int]) -> bytes:
    events = [(None, {"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]}}]})
        for i in indices]
    events.append((None, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    events.append((None, "[DONE]"))
    return sse(events)


@ambit.tool
def noop() -> str:
    """Does nothing."""
    return "done"


def test_a_chat_tool_call_index_of_2e9_is_a_typed_error(hostile: Any) -> None:
    message = refused(chat(hostile(lambda: [chat_calls([0, 2_000_000_000])]).base_url), "max_tool_calls")
    assert "2000000000" in message
    # The control: indices up to 1023 (the last allowed) are read; the run goes on to its turn limit.
    with pytest.raises(ambit.MaxTurnsExceeded):
        run(chat(hostile(lambda: [chat_calls(range(1024))]).base_url), tools=[noop], max_turns=1)


def anthropic_stream(index: Any, block: Any) -> bytes:
    return sse([
        ("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message",
                                                                 "role": "assistant", "content": [],
                                                                 "usage": {"input_tokens": 3, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": index,
                                 "delta": {"type": "text_delta", "text": "hi"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ])


TEXT_BLOCK = {"type": "text", "text": ""}


def test_an_anthropic_block_index_of_3e9_is_a_typed_error(hostile: Any) -> None:
    message = refused(anthropic(hostile(lambda: [anthropic_stream(3_000_000_000, TEXT_BLOCK)]).base_url),
                      "max_content_blocks")
    assert "3000000000" in message
    # The control: index 4095 (the last allowed) is read.
    assert run(anthropic(hostile(lambda: [anthropic_stream(4095, TEXT_BLOCK)]).base_url)).output == "hi"


# ---------------------------------------------------------------------------------------------------
# Wrong-shaped blocks: the panic that reached Python as a RuntimeError.

@pytest.mark.parametrize(("block", "what"), [
    ("text", "without a block object"),
    ([1, 2], "without a block object"),
    ({"type": "text", "text": 5}, "text that is not a string"),
])
def test_a_wrong_shaped_anthropic_block_is_a_typed_error(hostile: Any, block: Any, what: str) -> None:
    refused(anthropic(hostile(lambda: [anthropic_stream(0, block)]).base_url), what)


def test_a_well_shaped_anthropic_block_is_read(hostile: Any) -> None:
    assert run(anthropic(hostile(lambda: [anthropic_stream(0, TEXT_BLOCK)]).base_url)).output == "hi"


# ---------------------------------------------------------------------------------------------------
# Usage near 2**64 under a token budget.

def calling_noop(prompt: int, completion: int) -> Any:
    body = {"id": "c", "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    return lambda: [json.dumps(body).encode()]


def test_usage_near_u64_max_still_stops_the_token_budget(hostile: Any) -> None:
    url = hostile(calling_noop(U64_MAX, 5), "application/json").base_url
    with pytest.raises(ambit.BudgetExceeded) as e:
        run(chat(url, stream=False), tools=[noop], max_turns=4, max_tokens=1000)
    assert e.value.code == "budget_exceeded"
    # The control: small counts stay under the budget; the run goes on to its turn limit.
    url = hostile(calling_noop(10, 5), "application/json").base_url
    with pytest.raises(ambit.MaxTurnsExceeded):
        run(chat(url, stream=False), tools=[noop], max_turns=4, max_tokens=1000)
