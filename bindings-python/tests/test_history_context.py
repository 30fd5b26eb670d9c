"""Message history and run context from Python (issue 21, items 4 and 5): typed messages round-trip
through `result.messages` and back into `run`; a run's context reaches its own tools and no other
run's. The shared scenario files (history_*, run_context) run in test_scenarios.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

import ambit


@dataclass(frozen=True)
class User:
    name: str


def whoami_model() -> ambit.FunctionModel:
    """Calls `whoami` until the conversation holds its result, then answers with it."""
    def answer(request: ambit.TestRequest) -> ambit.Reply | str:
        last = request.messages[-1]
        if last["role"] == "tool":
            return f"you are {last['content']}"
        return ambit.Reply.tool_call("whoami", {})
    return ambit.FunctionModel(answer)


async def two_runs(agent: ambit.Agent) -> tuple[str, str]:
    a, b = await asyncio.gather(agent.run("who am I?", context=User("ada")),
                                agent.run("who am I?", context=User("bob")))
    return a.output, b.output


def test_two_concurrent_runs_each_see_their_own_context() -> None:
    async def main() -> tuple[str, str]:
        # Both calls wait for each other: the two runs are in flight together when each reads its user.
        barrier = asyncio.Barrier(2)

        @ambit.tool
        async def whoami(ctx: ambit.ToolContext[User]) -> str:
            """The current user."""
            await barrier.wait()
            return ctx.context.name

        return await two_runs(ambit.Agent(model=whoami_model(), tools=[whoami]))
    assert asyncio.run(main()) == ("you are ada", "you are bob")


def test_the_check_catches_a_context_shared_between_runs() -> None:
    # Negative control: a tool that reads the user from a slot the runs share gives both one user.
    async def main() -> tuple[str, str]:
        barrier = asyncio.Barrier(2)
        shared: list[str] = []

        @ambit.tool
        async def whoami(ctx: ambit.ToolContext[User]) -> str:
            """The current user."""
            shared[:] = [ctx.context.name]
            await barrier.wait()
            return shared[0]

        return await two_runs(ambit.Agent(model=whoami_model(), tools=[whoami]))
    a, b = asyncio.run(main())
    assert a == b and (a, b) != ("you are ada", "you are bob")


def test_a_run_without_context_gives_the_tool_a_typed_error() -> None:
    @ambit.tool
    def whoami(ctx: ambit.ToolContext[User]) -> str:
        """The current user."""
        return ctx.context.name

    agent = ambit.Agent(model=whoami_model(), tools=[whoami])
    result = agent.run_sync("who am I?")
    assert result.tool_calls[0].is_error and "the run has no context" in result.tool_calls[0].result
    assert agent.run_sync("who am I?", context=User("cy")).output == "you are cy"


def test_a_history_round_trips_as_typed_messages() -> None:
    seen: list[ambit.TestRequest] = []

    def answer(request: ambit.TestRequest) -> ambit.Reply | str:
        seen.append(request)
        if request.index == 1:
            return ambit.Reply.tool_call("get_weather", {"city": "Oslo"})
        return f"answer {request.index}"

    @ambit.tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"sunny in {city}"

    agent = ambit.Agent(model=ambit.FunctionModel(answer), tools=[get_weather])
    first = agent.run_sync("Weather in Oslo?")
    assert [type(m) for m in first.messages] == [ambit.UserMessage, ambit.AssistantMessage,
                                                 ambit.ToolResultMessage, ambit.AssistantMessage]
    call = first.messages[1]
    assert isinstance(call, ambit.AssistantMessage) and call.tool_calls[0].name == "get_weather"
    second = agent.run_sync([*first.messages, ambit.UserMessage("And tomorrow?")])
    assert second.output == "answer 3"
    assert [m["role"] for m in seen[2].messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert second.messages[:4] == first.messages and second.messages[4] == ambit.UserMessage("And tomorrow?")


def test_a_bad_history_names_the_message_and_field() -> None:
    agent = ambit.Agent(model=ambit.TestModel(["never"]), tools=[])
    with pytest.raises(ambit.InvalidMessage) as info:
        agent.run_sync([ambit.UserMessage("hi"), ambit.ToolResultMessage("nope", "t", "r")])
    assert (info.value.index, info.value.field) == (1, "call_id"), info.value
    with pytest.raises(ambit.InvalidMessage) as info:
        agent.run_sync([{"role": "user", "content": 5}])
    assert (info.value.index, info.value.field) == (0, "content")
    with pytest.raises(TypeError):
        agent.run_sync(42)  # type: ignore[arg-type]


def test_session_runs_each_see_their_own_context_and_none_is_stored(tmp_path: Path) -> None:
    # Two session runs in flight together (each tool call waits for the other), each with its user;
    # the control: the same session run without a context gives the tool the typed error.
    async def main() -> tuple[str, str, ambit.RunResult, list[str]]:
        barrier = asyncio.Barrier(2)

        @ambit.tool
        async def whoami(ctx: ambit.ToolContext[User]) -> str:
            """The current user."""
            if ctx.context.name in ("ada", "bob"):
                await barrier.wait()
            return ctx.context.name

        agent = ambit.Agent(model=whoami_model(), tools=[whoami])
        sessions = await ambit.Sessions.open(f"sqlite://{tmp_path / 's.db'}")
        s1, s2 = await sessions.create(), await sessions.create()
        a, b = await asyncio.gather(sessions.run(agent, s1, "who am I?", context=User("ada")),
                                    sessions.run(agent, s2, "who am I?", context=User("bob")))
        bare = await sessions.run(agent, s1, "who am I?")
        stored = [str(e) for e in await sessions.entries(s1)]
        return a.output, b.output, bare, stored
    a, b, bare, stored = asyncio.run(main())
    assert (a, b) == ("you are ada", "you are bob")
    assert bare.tool_calls[0].is_error and "the run has no context" in bare.tool_calls[0].result
    # The context object itself is never stored (only what the tool returned from it).
    assert not any("User(" in e for e in stored), stored


def test_a_session_run_sync_takes_a_context(tmp_path: Path) -> None:
    @ambit.tool
    def whoami(ctx: ambit.ToolContext[User]) -> str:
        """The current user."""
        return ctx.context.name

    sessions = ambit.Sessions.open_sync(f"sqlite://{tmp_path / 's.db'}")
    sid = sessions.create_sync()
    agent = ambit.Agent(model=whoami_model(), tools=[whoami])
    assert sessions.run_sync(agent, sid, "who am I?", context=User("cy")).output == "you are cy"


def test_a_session_refuses_a_message_list_and_stores_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        sessions = await ambit.Sessions.open(f"sqlite://{tmp_path / 's.db'}")
        sid = await sessions.create()
        agent = ambit.Agent(model=ambit.TestModel(["never"]), tools=[])
        with pytest.raises(ambit.ConfigError, match="a session keeps its own history"):
            await sessions.run(agent, sid, [ambit.UserMessage("hi")])  # type: ignore[arg-type]
        assert await sessions.entries(sid) == []
    asyncio.run(main())


def test_a_tool_context_is_typed_for_mypy(tmp_path: Path) -> None:
    # `ToolContext[User].context` is a `User` to mypy --strict: a field it has passes, one it lacks fails.
    import subprocess
    import sys
    source = '''import ambit
from dataclasses import dataclass

@dataclass(frozen=True)
class User:
    name: str

@ambit.tool
def whoami(ctx: ambit.ToolContext[User]) -> str:
    """The current user."""
    return ctx.context.{field}
'''
    outcomes = []
    for field in ("name", "email"):
        path = tmp_path / f"typed_{field}.py"
        path.write_text(source.replace("{field}", field))
        run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(path)],
                             capture_output=True, text=True)
        outcomes.append((run.returncode, run.stdout))
    assert outcomes[0][0] == 0, outcomes[0][1]
    assert outcomes[1][0] != 0 and '"User" has no attribute "email"' in outcomes[1][1], outcomes[1][1]
