"""Runs against llama.cpp's real OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1, with a
tiny model the suite writes itself (tests/llama/tiny_model.py: a bigram table whose greedy answers the
chat template steers). The server's own grammar makes its tool calls, so they are real calls of the real
server: streamed and not, with its usage counts and finish reasons."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

import ambit
from conftest import REPO, close_stdin_and_wait

LLAMA = REPO / "tests" / "llama"


class LlamaServer:
    """llama.cpp's server on 127.0.0.1 (tests/llama/serve.py); it stops when its stdin closes."""

    def __init__(self, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen([sys.executable, str(LLAMA / "serve.py"), "--tiny"], stdin=subprocess.PIPE,
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
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log")
    yield server
    server.close()


def agent_for(llama: LlamaServer, *, stream: bool, calls: list[str],
              text_tool_calls: ambit.TextToolCalls | None = None) -> ambit.Agent:
    @ambit.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        calls.append(city)
        return f"sunny in {city}"

    return ambit.Agent(model=ambit.OpenAIChat("tiny", base_url=llama.base_url, api_key="none", stream=stream,
                                              text_tool_calls=text_tool_calls),
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


@pytest.mark.parametrize("stream", [False, True])
def test_constrained_decoding_makes_the_real_server_write_a_valid_call_as_text(llama: LlamaServer, stream: bool) -> None:
    # text_tool_calls="constrained" sends a response_format JSON schema (one call of an offered tool, or a
    # JSON string); llama.cpp turns it into a grammar, so the random-weight model can only write a valid
    # call. The server sends it as text (content), the reader reads it, and the Python tool runs; the answer
    # to the tool's result is the JSON string "P".
    calls: list[str] = []
    agent = agent_for(llama, stream=stream, calls=calls, text_tool_calls="constrained")

    async def events() -> list[Any]:
        return [e async for e in agent.stream("Weather in Paris, as json?")]

    seen = asyncio.run(events())
    result = seen[-1].result
    assert calls == ["P"]
    assert [(c.name, c.arguments, c.is_error) for c in result.tool_calls] == [("get_weather", {"city": "P"}, False)]
    requested = [e for e in seen if e.type == "tool_call_requested"]
    assert [(e.name, e.from_text) for e in requested] == [("get_weather", True)]
    assert result.output == "P" and result.stop_reason == "end"
    # Only the answer is shown: the call's JSON never reached the text deltas.
    assert "".join(e.text for e in seen if e.type == "text_delta") == "P"


def test_without_the_constraint_the_same_model_writes_no_call(llama: LlamaServer) -> None:
    # Negative control: "auto" reads calls but asks for no grammar; the same prompt gets text that is not
    # JSON (the bigram table's "{P\"}…"), which stays the answer, and no tool runs.
    calls: list[str] = []
    result = agent_for(llama, stream=False, calls=calls, text_tool_calls="auto").run_sync("Weather in Paris, as json?")
    assert calls == [] and result.tool_calls == []
    assert result.output.startswith("{") and result.stop_reason == "length"
