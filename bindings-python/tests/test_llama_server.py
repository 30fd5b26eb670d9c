"""Runs against llama.cpp's real OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1, with a
tiny model the suite writes itself (tests/llama/tiny_model.py: a bigram table whose greedy answers the
chat template steers). The server's own grammar makes its tool calls, so they are real calls of the real
server: streamed and not, with its usage counts and finish reasons."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import ambit
from conftest import REPO, close_stdin_and_wait

LLAMA = REPO / "tests" / "llama"


def tiny_model() -> Path:
    """The tiny model, written once per version of its generator under $AMBIT_CACHE/llama."""
    source = (LLAMA / "tiny_model.py").read_bytes()
    cache = Path(os.environ.get("AMBIT_CACHE", Path.home() / ".cache" / "ambit")) / "llama"
    path = cache / f"tiny-{hashlib.sha256(source).hexdigest()[:16]}.gguf"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        subprocess.run([sys.executable, str(LLAMA / "tiny_model.py"), str(partial)], check=True)
        partial.replace(path)
    return path


class LlamaServer:
    """llama.cpp's server on 127.0.0.1 (tests/llama/serve.py); it stops when its stdin closes."""

    def __init__(self, model: Path, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen([sys.executable, str(LLAMA / "serve.py"), str(model)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http://127.0.0.1:"):
            self.close()
            raise RuntimeError(f"llama.cpp's server did not start ({self.base_url!r}); its log: {log}")

    def close(self) -> None:
        close_stdin_and_wait(self.proc, 30)
        self.log.close()


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(tiny_model(), tmp_path_factory.mktemp("llama") / "server.log")
    yield server
    server.close()


def agent_for(llama: LlamaServer, *, stream: bool, calls: list[str]) -> ambit.Agent:
    @ambit.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"sunny in {city}"

    return ambit.Agent(model=ambit.OpenAIChat("tiny", base_url=llama.base_url, api_key="none", stream=stream),
                       tools=[get_weather], max_turns=4)


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_of_the_real_server_reaches_a_python_tool(llama: LlamaServer, stream: bool) -> None:
    calls: list[str] = []
    result = agent_for(llama, stream=stream, calls=calls).run_sync("Weather in Paris?")
    # The server's grammar wrote the call ({"city": "P"}), the tool ran, and the model's answer to the
    # tool's result ended the run.
    assert calls == ["P"]
    assert [(c.name, c.arguments, c.result, c.is_error) for c in result.tool_calls] == [
        ("get_weather", {"city": "P"}, "sunny in P", False)]
    assert result.output == "OK"
    assert result.turns == 2
    # Usage as the server counted it: both requests, each with prompt and completion tokens (the server
    # reuses its prompt cache across requests, reported as cache reads).
    usage = result.usage
    assert usage.requests == 2
    assert usage.input_tokens + usage.cache_read_tokens > 400 and usage.output_tokens > 2


def test_the_real_server_streams_text_and_reports_usage_per_request(llama: LlamaServer) -> None:
    calls: list[str] = []
    agent = agent_for(llama, stream=True, calls=calls)

    async def events() -> list[Any]:
        return [e async for e in agent.stream("Weather in Paris?")]

    seen = asyncio.run(events())
    types = [e.type for e in seen]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert "tool_started" in types and "tool_finished" in types
    assert "".join(e.text for e in seen if e.type == "text_delta") == "OK"
    responses = [e for e in seen if e.type == "model_response"]
    assert len(responses) == 2
    assert all(r.usage.input_tokens + r.usage.cache_read_tokens > 0 and r.usage.output_tokens > 0 for r in responses)
    assert seen[-1].result.usage.output_tokens == sum(r.usage.output_tokens for r in responses)
    assert calls == ["P"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_text_answer_cut_by_the_servers_token_limit_is_marked_length(llama: LlamaServer, stream: bool) -> None:
    # The model writes "a" until the server's limit (96 tokens): no call is made up, and the result says
    # the answer was cut.
    calls: list[str] = []
    agent = agent_for(llama, stream=stream, calls=calls)

    async def events() -> list[Any]:
        return [e async for e in agent.stream("please ramble")]

    seen = asyncio.run(events())
    result = seen[-1].result
    assert calls == [] and result.tool_calls == []
    assert result.output == "a" * 96
    assert result.stop_reason == "length"
    assert [e.stop_reason for e in seen if e.type == "model_response"] == ["length"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_cut_by_the_servers_token_limit_never_runs(llama: LlamaServer, stream: bool) -> None:
    # The only city the schema allows is longer than the output token limit leaves room for: the
    # server's grammar writes the call until the limit cuts it (finish_reason "length", arguments
    # '{"city":"Llanfair…'). The call must not run, and the run ends with output_truncated.
    calls: list[str] = []
    long_city = "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch, Anglesey, Wales"

    def get_weather(city: str) -> str:
        calls.append(city)
        return "sunny"

    weather = ambit.Tool(get_weather, description="Current weather for a city.",
                         parameters={"type": "object", "properties": {"city": {"type": "string", "enum": [long_city]}},
                                     "required": ["city"]})
    # The limit is this request's own (max_output_tokens, sent as max_completion_tokens), below the server's
    # 96: 40 tokens end inside the arguments (at 20 the server cut the call while its name was still text,
    # and the answer came back as text with stop reason length).
    agent = ambit.Agent(model=ambit.OpenAIChat("tiny", base_url=llama.base_url, api_key="none", stream=stream,
                                               max_output_tokens=40),
                        tools=[weather], max_turns=4)
    with pytest.raises(ambit.OutputTruncated) as info:
        agent.run_sync("Weather in Paris?")
    assert calls == []
    assert info.value.code == "output_truncated" and info.value.tools == ["get_weather"]
    assert info.value.usage["requests"] == 1 and info.value.usage["output_tokens"] == 40
