"""The loop's settings and the event stream from Python, beyond the shared scenarios."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

import pytest

import ambit
from conftest import REPO


def test_each_wire_has_a_model_class_and_bad_settings_are_typed_errors() -> None:
    assert ambit.Anthropic("claude", stream=True)._config() == {"wire": "anthropic", "model": "claude", "stream": True}
    assert ambit.OpenAIResponses("gpt", timeout=5)._config()["timeout_secs"] == 5
    with pytest.raises(TypeError):
        ambit.OpenAIChat("m", stream="yes")  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="max_concurrency must be at least 1"):
        ambit.Agent(model=ambit.OpenAIChat("m"), max_concurrency=0)
    with pytest.raises(ambit.ConfigError, match="no price for the model 'm'"):
        ambit.Agent(model=ambit.OpenAIChat("m"), max_cost=1.0)
    with pytest.raises(ambit.ConfigError, match="timeout_secs must be a positive number"):
        ambit.Agent(model=ambit.Anthropic("m", timeout=-1))


def test_leaving_the_stream_early_stops_without_an_error(start_provider: Any) -> None:
    path = REPO / "tests" / "scenarios" / "weather_two_calls.json"
    provider = start_provider(path)

    @ambit.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    @ambit.tool
    def get_time(city: str) -> str:
        """Local time in a city."""
        return "14:00"

    cfg = json.loads(path.read_text())["agent"]
    agent = ambit.Agent(model=ambit.OpenAIChat(cfg["model"], base_url=provider.base_url, api_key=cfg["api_key"]),
                        instructions=cfg["instructions"], tools=[get_weather, get_time])

    async def first_events() -> list[str]:
        seen = []
        async with contextlib.aclosing(agent.stream("Weather in Paris and London?")) as events:
            async for event in events:
                seen.append(event.type)
                if event.type == "model_response":
                    break
        return seen

    assert asyncio.run(first_events()) == ["run_started", "model_request", "model_response"]
    assert provider.state()["mismatches"] == []


def test_a_per_endpoint_max_tool_name_bytes_cuts_names_and_never_exceeds_the_wire(start_provider: Any,
                                                                                 tmp_path: Any) -> None:
    import hashlib

    whole = "lookup_the_current_weather_for_a_city"
    cut = whole[: 24 - 13] + "_" + hashlib.sha256(whole.encode()).hexdigest()[:12]
    scenario = tmp_path / "short_names.json"
    scenario.write_text(json.dumps({"name": "short_names", "wire": "openai_chat", "exchanges": [
        {"expect": {"tool_names": [cut]},
         "respond": {"tool_calls": [{"id": "c1", "name": cut, "arguments": {"city": "Oslo"}}]}},
        {"respond": {"content": "done"}},
    ]}))
    provider = start_provider(scenario)

    @ambit.tool(name=whole)
    def weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    model = ambit.OpenAIChat("m", base_url=provider.base_url, api_key="k", max_retries=0, max_tool_name_bytes=24)
    result = ambit.Agent(model=model, tools=[weather]).run_sync("weather?")
    assert provider.state()["mismatches"] == []
    assert (result.tool_calls[0].name, result.tool_calls[0].result) == (whole, "sunny in Oslo")
    # Never larger than the wire's own limit; the error names the setting.
    with pytest.raises(ambit.ConfigError, match="max_tool_name_bytes 65 is larger than the openai_chat wire's own limit of 64"):
        ambit.Agent(model=ambit.OpenAIChat("m", max_tool_name_bytes=65))
    with pytest.raises(ambit.ConfigError, match="max_tool_name_bytes must be a whole number, 0 or more; got -1"):
        ambit.Agent(model=ambit.Anthropic("m", max_tool_name_bytes=-1))
    assert ambit.Agent(model=ambit.Anthropic("m", max_tool_name_bytes=128)) is not None


def test_a_bad_count_in_the_model_settings_is_refused_by_name() -> None:
    with pytest.raises(ambit.ConfigError, match="max_retries must be a whole number, 0 or more; got -1"):
        ambit.Agent(model=ambit.OpenAIChat("m", max_retries=-1))
    with pytest.raises(ambit.ConfigError, match="max_tokens must be a whole number, 0 or more; got -2"):
        ambit.Agent(model=ambit.Anthropic("m", max_tokens=-2))


def test_model_settings_refused_by_name() -> None:
    """Issue 14: a bad value, a setting the wire lacks and an unknown option are refused naming them."""
    for model, words in [
        (ambit.OpenAIChat("m", temperature=2.5), "temperature must be between 0 and 2, got 2.5"),
        (ambit.OpenAIChat("m", top_p=-0.1), "top_p must be between 0 and 1, got -0.1"),
        (ambit.OpenAIChat("m", temperature=float("nan")), "temperature must be a finite number, got nan"),
        (ambit.OpenAIChat("m", max_output_tokens=0), "max_output_tokens must be at least 1"),
        (ambit.OpenAIChat("m", stop=["a", "b", "c", "d", "e"]), "stop takes 1 to 4 texts, got 5"),
        (ambit.OpenAIChat("m", stop="END"), "stop must be a list of texts"),
        (ambit.OpenAIChat("m", tool_choice="any"), 'tool_choice must be "auto", "required", "none"'),
        (ambit.Anthropic("m", seed=7), "seed is not a setting of the anthropic wire"),
        (ambit.Anthropic("m", temperature=0.5), "temperature is not a setting of the anthropic wire"),
        (ambit.Anthropic("m", top_p=0.5), "top_p is not a setting of the anthropic wire"),
        (ambit.OpenAIResponses("m", stop=["END"]), "stop is not a setting of the openai_responses wire"),
        (ambit.Anthropic("m", max_tokens=10, max_output_tokens=20),
         r"max_tokens \(10\) and max_output_tokens \(20\) are the same setting"),
    ]:
        with pytest.raises(ambit.ConfigError, match=words):
            ambit.Agent(model=model)
    with pytest.raises(TypeError, match="temprature"):
        ambit.OpenAIChat("m", temprature=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="max_tokens"):
        ambit.OpenAIChat("m", max_tokens=10)  # type: ignore[call-arg]
    # Negative control: the same settings in range, on wires that have them, build.
    ambit.Agent(model=ambit.OpenAIChat("m", temperature=2, top_p=0, max_output_tokens=1, stop=("a",), seed=7,
                                       tool_choice={"name": "f"}, parallel_tool_calls=False))
    ambit.Agent(model=ambit.Anthropic("m", max_tokens=10, max_output_tokens=10, stop=["x"], tool_choice="none"))


def test_reasoning_thinking_text_calls_headers_and_query_are_refused_by_name() -> None:
    # Issue 14, items 1 and 5: each wrong value is a ConfigError naming the setting (and the wire).
    for model, words in [
        (ambit.OpenAIChat("m", reasoning_effort="extreme"), "reasoning_effort must be one of none, minimal"),
        (ambit.Anthropic("m", reasoning_effort="minimal"), 'reasoning_effort "minimal" is not a value of the anthropic wire'),
        (ambit.OpenAIChat("m", thinking_budget=2048), "thinking_budget is not a setting of the openai_chat wire"),
        (ambit.Anthropic("m", thinking_budget=8000), "thinking_budget (8000) must be less than max_tokens (4096)"),
        (ambit.OpenAIResponses("m", text_tool_calls="auto"), "text_tool_calls is not a setting of the openai_responses wire"),
        (ambit.OpenAIChat("m", text_tool_calls="on"), 'text_tool_calls must be "off", "auto" or "constrained"'),  # type: ignore[arg-type]
        (ambit.OpenAIChat("m", headers={"Host": "evil.example"}), "headers: Host is set by the HTTP exchange itself"),
        (ambit.OpenAIChat("m", headers={"api-key": "k\r\nX: 1"}), "the value of api-key is not a valid header value"),
        (ambit.OpenAIChat("m", query={"": "x"}), "query: a parameter name is empty"),
        (ambit.OpenAIChat("m", prompt_caching=True), "prompt_caching is not a setting of the openai_chat wire"),
        (ambit.Anthropic("m", thinking_budget=2048, tool_choice="required"),
         'tool_choice "required" cannot be used with thinking_budget'),
        (ambit.Anthropic("m", thinking_budget=2048, tool_choice={"name": "f"}), "cannot be used with thinking_budget"),
        (ambit.OpenAIChat("m", store=False), "store is not a setting of the openai_chat wire"),
        (ambit.OpenAIChat("m", strict="yes"), "strict must be true or false"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(ambit.ConfigError, match=re.escape(words)):
            ambit.Agent(model=model)
    with pytest.raises(TypeError, match="header"):
        ambit.OpenAIChat("m", header={"api-key": "k"})  # type: ignore[call-arg]
    # Negative control: good ones build.
    ambit.Agent(model=ambit.OpenAIChat("m", reasoning_effort="low", text_tool_calls="constrained",
                                       headers={"api-key": "k"}, query={"api-version": "2024-10-21"}))
    ambit.Agent(model=ambit.Anthropic("m", thinking_budget=2048, max_output_tokens=4096, reasoning_effort="max"))
    ambit.Agent(model=ambit.Anthropic("m", thinking_budget=2048, tool_choice="auto"))
    ambit.Agent(model=ambit.OpenAIResponses("m", store=False, strict=False))
