"""The loop's settings and the event stream from Python, beyond the shared scenarios."""

from __future__ import annotations

import asyncio
import contextlib
import json
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
