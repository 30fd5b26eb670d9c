"""Every scenario file in tests/scenarios/, run from Python: the same files the Rust, Node and Swift
suites run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import ambit
from conftest import SCENARIOS


def fill(template: str, args: dict[str, Any]) -> str:
    for k, v in args.items():
        template = template.replace("{" + k + "}", v if isinstance(v, str) else json.dumps(v))
    return template


def scenario_tool(spec: dict[str, Any], use_async: bool) -> ambit.Tool:
    behavior = spec["behavior"]

    def act(**kwargs: Any) -> str:
        if "returns" in behavior:
            return fill(behavior["returns"], kwargs)
        raise RuntimeError(fill(behavior["raises"], kwargs))

    async def act_async(**kwargs: Any) -> str:
        await asyncio.sleep(0)
        return act(**kwargs)

    return ambit.tool(act_async if use_async else act, name=spec["name"], description=spec["description"],
                      parameters=spec["parameters"])


def build_agent(scenario: dict[str, Any], base_url: str, use_async: bool = False) -> ambit.Agent:
    cfg = scenario["agent"]
    return ambit.Agent(
        model=ambit.OpenAIChat(cfg["model"], base_url=base_url, api_key=cfg.get("api_key")),
        instructions=cfg.get("instructions"),
        max_turns=cfg.get("max_turns"),
        tools=[scenario_tool(t, use_async) for t in scenario["tools"]],
    )


def check(scenario: dict[str, Any], run: Any) -> None:
    expect = scenario["expect"]
    if "error" in expect:
        with pytest.raises(ambit.AmbitError) as info:
            run()
        assert info.value.code == expect["error"]["code"], info.value
        if "message_contains" in expect["error"]:
            assert expect["error"]["message_contains"] in str(info.value)
        return
    result = run()
    if "output" in expect:
        assert result.output == expect["output"]
    if "tool_calls" in expect:
        assert len(result.tool_calls) == len(expect["tool_calls"]), result.tool_calls
        for want, got in zip(expect["tool_calls"], result.tool_calls):
            for key, value in want.items():
                assert getattr(got, key) == value, (key, got)
    for key, value in expect.get("usage", {}).items():
        assert getattr(result.usage, key) == value, (key, result.usage)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_async(path: Path, start_provider: Any) -> None:
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    agent = build_agent(scenario, provider.base_url, use_async=True)
    check(scenario, lambda: asyncio.run(agent.run(scenario["input"])))
    state = provider.state()
    assert state["mismatches"] == [] and state["remaining"] == 0, state


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_sync(path: Path, start_provider: Any) -> None:
    scenario = json.loads(path.read_text())
    provider = start_provider(path)
    agent = build_agent(scenario, provider.base_url, use_async=False)
    check(scenario, lambda: agent.run_sync(scenario["input"]))
    assert provider.state()["remaining"] == 0
