"""Profiles and named agents (issue #21): bad configuration is a ConfigError naming the field; the
named-agent tools exist exactly when named agents are configured. Their behaviour on the wire is in the
shared scenario files (profile_spawn_followup.json, named_agent_delegate.json)."""

from __future__ import annotations

from typing import Any

import pytest

import ambit


def names(agent: ambit.Agent) -> list[str]:
    return [t.name for t in agent.list_tools()]


def test_a_bad_profile_name_is_refused_naming_the_field() -> None:
    with pytest.raises(ambit.ConfigError, match="profiles: 'no spaces'"):
        ambit.Agent(model=ambit.OpenAIChat("m"), profiles={"no spaces": ambit.OpenAIChat("n")})


def test_a_profile_that_is_not_a_model_is_refused_naming_it() -> None:
    bad: Any = {"fast": "gpt-4.1-nano"}
    with pytest.raises(ambit.ConfigError, match=r"profiles\['fast'\]"):
        ambit.Agent(model=ambit.OpenAIChat("m"), profiles=bad)


def test_a_blank_description_is_refused_naming_the_field() -> None:
    callee = ambit.Agent(model=ambit.OpenAIChat("m"))
    with pytest.raises(ambit.ConfigError, match=r"named_agents\.helper\.description"):
        ambit.Agent(model=ambit.OpenAIChat("m"), agents={"helper": ambit.NamedAgent(callee, description="  ")})


def test_a_named_agent_that_is_not_one_is_refused_naming_it() -> None:
    bad: Any = {"helper": ambit.Agent(model=ambit.OpenAIChat("m"))}
    with pytest.raises(ambit.ConfigError, match=r"agents\['helper'\]"):
        ambit.Agent(model=ambit.OpenAIChat("m"), agents=bad)


def test_the_named_agent_tools_exist_only_with_named_agents() -> None:
    callee = ambit.Agent(model=ambit.OpenAIChat("m"))
    assert "agent_delegate" not in names(ambit.Agent(model=ambit.OpenAIChat("m")))
    caller = ambit.Agent(model=ambit.OpenAIChat("m"), agents={"helper": ambit.NamedAgent(callee, "Helps.")})
    assert {"agent_list_named", "agent_delegate"} <= set(names(caller))


@ambit.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


def test_the_readme_example() -> None:
    # The README's example, as a user writes it (test models stand in for hosted ones).
    fast = ambit.TestModel(["Paris: mild."])   # e.g. ambit.OpenAIChat("gpt-4.1-nano", temperature=0.2)
    researcher = ambit.Agent(
        model=ambit.TestModel([ambit.Reply.tool_call("get_weather", {"city": "Paris"}), "Sunny in Paris."]),
        instructions="You research weather.", tools=[get_weather])
    boss = ambit.Agent(
        model=ambit.TestModel([
            ambit.Reply.tool_call("agent_spawn", {"prompt": "Summarise Paris weather.", "profile": "fast"}),
            ambit.Reply.tool_call("agent_delegate", {"agent": "researcher", "prompt": "Weather in Paris?"}),
            "It is sunny in Paris.",
        ]),
        subagents=True,
        profiles={"fast": fast},
        agents={"researcher": ambit.NamedAgent(researcher, description="Looks up weather; one city per task.")},
    )
    result = boss.run_sync("Weather in Paris?")
    assert result.output == "It is sunny in Paris."
    spawn, delegate = result.tool_calls
    assert "Profile: fast" in spawn.result and spawn.result.endswith("Paris: mild.")
    assert delegate.result.startswith("Agent: researcher") and delegate.result.endswith("Sunny in Paris.")
