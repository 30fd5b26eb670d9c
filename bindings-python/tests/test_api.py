"""The Python surface: schemas from type hints, typed errors for bad input, results as dataclasses."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal, Optional

import pytest

import ambit
from conftest import REPO


def test_schema_from_type_hints_and_docstring() -> None:
    @ambit.tool
    def get_weather(city: str, days: int = 1, unit: Literal["c", "f"] = "c", detail: Optional[bool] = None,
                    tags: list[str] | None = None) -> str:
        """Current weather for a city.

        Args:
            city: City name.
            days: How many days ahead,
                counting today.
        """
        return "sunny"

    assert get_weather.name == "get_weather"
    assert get_weather.description == "Current weather for a city."
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name."},
            "days": {"type": "integer", "description": "How many days ahead, counting today.", "default": 1},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "detail": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["city"],
    }
    assert get_weather("x") == "sunny"  # still callable as a function


def test_wire_name_is_the_name_the_model_sees() -> None:
    assert ambit.wire_name("get_weather") == "get_weather"
    long = "mcp__github__" + "list_pull_requests_" * 4
    short = ambit.wire_name(long)
    assert len(short) == 64 and short.startswith(long[:51] + "_")
    assert ambit.wire_name(long, max_bytes=128) == long
    assert ambit.wire_name("files.read") == ambit.wire_name("files.read", 64) != "files.read"
    assert ambit.wire_name("files.read").startswith("files_read_")


def test_a_type_without_schema_is_refused_by_name() -> None:
    class Point:
        pass

    with pytest.raises(TypeError, match="tool 'f', parameter 'p'"):
        @ambit.tool
        def f(p: Point) -> str:
            return ""


def test_duplicate_tool_names_are_a_config_error() -> None:
    def a(x: str) -> str:
        return x

    with pytest.raises(ambit.ConfigError, match="'a' is already registered") as info:
        ambit.Agent(model="gpt-4.1", tools=[a, ambit.tool(a)])
    assert info.value.code == "config"
    assert isinstance(info.value, ValueError)


def test_parameters_that_are_not_an_object_schema_are_refused() -> None:
    with pytest.raises(ambit.ConfigError, match="tool 't': parameters must be a JSON Schema object"):
        ambit.Agent(model="gpt-4.1", tools=[ambit.tool(lambda: "", name="t", parameters={"type": "string"})])


@pytest.mark.parametrize("bad", [0, -1, "3", True])
def test_max_turns_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ambit.ConfigError, match="max_turns"):
        ambit.Agent(model="gpt-4.1", max_turns=bad)


def test_wrong_types_are_type_errors() -> None:
    with pytest.raises(TypeError, match="model must be"):
        ambit.Agent(model=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a tool needs a function"):
        ambit.Tool("not callable")  # type: ignore[arg-type]
    agent = ambit.Agent(model="gpt-4.1")
    with pytest.raises(TypeError, match="input must be a string"):
        asyncio.run(agent.run(5))  # type: ignore[arg-type]


def test_run_sync_inside_a_loop_says_what_to_do() -> None:
    agent = ambit.Agent(model="gpt-4.1")

    async def inside() -> None:
        agent.run_sync("hi")

    with pytest.raises(RuntimeError, match="await agent.run"):
        asyncio.run(inside())


def test_unreachable_provider_is_a_model_error() -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=f"http://127.0.0.1:{port}/v1"))
    with pytest.raises(ambit.ModelError) as info:
        agent.run_sync("hi")
    assert info.value.code == "model_transport"


def test_http_error_carries_status(start_provider: Any) -> None:
    path = REPO / "tests" / "scenarios" / "provider_error.json"
    provider = start_provider(path)
    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-wrong"))
    with pytest.raises(ambit.ModelError) as info:
        agent.run_sync("Hello?")
    assert info.value.status == 401
    assert "Incorrect API key provided" in str(info.value)


def test_a_run_sync_error_reads_without_a_chained_event_loop_error(start_provider: Any) -> None:
    # Issue 14 item 6: the traceback a user reads shows the model's error alone, not "During handling of
    # the above exception ... RuntimeError: no running event loop" (run_sync's own probe) before it.
    import traceback
    provider = start_provider(REPO / "tests" / "scenarios" / "provider_error.json")
    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-wrong"))
    with pytest.raises(ambit.ModelError) as info:
        agent.run_sync("Hello?")
    printed = "".join(traceback.format_exception(info.value))
    assert "Incorrect API key provided" in printed
    assert "no running event loop" not in printed and "During handling" not in printed, printed
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_max_turns_error_reports_usage(start_provider: Any) -> None:
    path = REPO / "tests" / "scenarios" / "turn_limit.json"
    scenario = json.loads(path.read_text())
    provider = start_provider(path)

    def get_weather(city: str) -> str:
        return "sunny"

    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url), tools=[get_weather],
                        max_turns=scenario["agent"]["max_turns"])
    with pytest.raises(ambit.MaxTurnsExceeded) as info:
        agent.run_sync(scenario["input"])
    assert info.value.max_turns == 2
    assert info.value.usage["requests"] == 2 and info.value.usage["input_tokens"] == 30


def test_result_types(start_provider: Any) -> None:
    path = REPO / "tests" / "scenarios" / "weather_single_call.json"
    provider = start_provider(path)

    @ambit.tool
    def get_weather(city: str) -> dict[str, str]:
        """Current weather for a city."""
        return {"sky": "sunny"} if city == "never" else "sunny"  # type: ignore[return-value]

    agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-test-ambit"),
                        instructions="You answer weather questions.", tools=[get_weather])
    result = agent.run_sync("Weather in Paris?")
    assert isinstance(result, ambit.RunResult) and isinstance(result.usage, ambit.Usage)
    assert result.tool_calls[0] == ambit.ToolCall(id="call_paris_1", name="get_weather",
                                                 arguments={"city": "Paris"}, result="sunny", is_error=False)
    assert result.turns == 2 and result.usage.total_tokens == 84 + 23
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


def test_policy_bad_input_is_a_config_error_naming_it(tmp_path: Any) -> None:
    with pytest.raises(ambit.ConfigError, match="unknown variant `Read`"):
        ambit.Agent(model="m", policy=ambit.Policy(level="Read"))  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="working directory '.*nowhere'"):
        ambit.Agent(model="m", policy=ambit.Policy(level="read", working_directory=tmp_path / "nowhere"))
    with pytest.raises(ambit.ConfigError, match="allow_tools is empty"):
        ambit.Agent(model="m", policy=ambit.Policy(allow_tools=[]))
    with pytest.raises(ambit.ConfigError, match="no built-in tool named 'file_delete'"):
        ambit.Agent(model="m", builtins=["file_delete"])
    with pytest.raises(TypeError, match="policy must be an ambit.Policy"):
        ambit.Agent(model="m", policy={"level": "read"})  # type: ignore[arg-type]


def test_with_policy_makes_a_narrowed_agent_and_refuses_bad_input(tmp_path: Any) -> None:
    @ambit.tool(level="workspace")
    def save(text: str) -> str:
        return text

    agent = ambit.Agent(model="m", tools=[save], policy=ambit.Policy(level="workspace"), subagents=True)
    with pytest.raises(TypeError, match="policy must be an ambit.Policy"):
        agent.with_policy({"level": "read"})  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="allow_tools is empty"):
        agent.with_policy(ambit.Policy(level="read", allow_tools=[]))
    with pytest.raises(ambit.ConfigError, match="working directory '.*nowhere'"):
        agent.with_policy(ambit.Policy(level="read", working_directory=tmp_path / "nowhere"))
    narrowed = agent.with_policy(ambit.Policy(level="read"))
    assert isinstance(narrowed, ambit.Agent) and narrowed is not agent
    assert narrowed.policy is not None and narrowed.policy.level == "read"
    status = {t.name: t.status for t in narrowed.list_tools()}
    assert status["save"] == "above_level" and status["agent_followup"] == "offered", status
    assert {t.name: t.status for t in agent.list_tools()}["save"] == "offered", "the agent itself is unchanged"


def test_list_tools_shows_effective_levels_and_status(tmp_path: Any) -> None:
    @ambit.tool(level="read")
    def look(q: str) -> str:
        return q

    def anything() -> str:
        return ""

    agent = ambit.Agent(model="m", tools=[look, anything], builtins=["file_read", "file_write"],
                        policy=ambit.Policy(level="read", working_directory=tmp_path,
                                            level_overrides={"file_read": "workspace"}, block_tools=["anything"]))
    got = {t.name: (t.level, t.declared_level, t.status, t.approval) for t in agent.list_tools()}
    assert got == {
        "look": ("read", "read", "offered", False),
        "anything": ("unrestricted", "unrestricted", "blocked", False),
        "file_read": ("workspace", "read", "above_level", False),
        "file_write": ("workspace", "workspace", "above_level", False),
    }
    asking = ambit.Agent(model="m", builtins=["file_write"],
                         policy=ambit.Policy(level="read", approvals=lambda r: ambit.Approve(),
                                             working_directory=tmp_path))
    assert [(t.status, t.approval) for t in asking.list_tools()] == [("offered", True)]


def test_a_failing_or_wrong_handler_denies_the_call(start_provider: Any) -> None:
    path = REPO / "tests" / "scenarios" / "approval_deny.json"
    scenario = json.loads(path.read_text())
    ran: list[str] = []

    @ambit.tool(name="delete_branch", level="workspace")
    def delete_branch(branch: str) -> str:
        ran.append(branch)
        return "deleted"

    for handler, reason in [
        (lambda r: 1 / 0, "division by zero"),
        (lambda r: "yes", "an approval handler returns Approve(), Deny(reason) or Revise(arguments)"),
    ]:
        provider = start_provider(path)
        # The scenario's second request expects its own denial text; this test checks the handler's failure
        # reached the model as a denial, so it reads the result, not the provider's verdict.
        agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url), tools=[delete_branch],
                            policy=ambit.Policy(level="read", approvals=handler))
        with pytest.raises(ambit.ModelError):
            agent.run_sync(scenario["input"])  # the provider refuses the unexpected denial text (HTTP 400)
        state = provider.state()
        assert any(f"the call to tool 'delete_branch' was denied: the approval handler failed" in m
                   and reason in m for m in state["mismatches"]), state
    assert ran == []


def test_cancelling_a_run_stops_it_at_once(tmp_path: Any, start_provider: Any) -> None:
    # The provider holds its answer for 30 s; cancelling the awaiting task ends the run now, and the
    # agent stays usable.
    scenario = {"name": "slow", "wire": "openai_chat", "exchanges": [
        {"expect": {}, "delay_ms": 30000, "respond": {"content": "late", "usage": {}}},
        {"expect": {}, "respond": {"content": "on time", "usage": {}}},
    ]}
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(scenario))
    provider = start_provider(path)
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=provider.base_url))

    async def go() -> str:
        task = asyncio.ensure_future(agent.run("hi"))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return (await agent.run("again")).output

    assert asyncio.run(go()) == "on time"
