"""Hooks and guardrails from Python (issue 21, items 2 and 3) beyond the shared scenario files
(hooks_*, guardrail_* in test_scenarios.py): what a hook sees (the run context, credentials only as
``[credential:alias]``), the typed errors, and a session that stores nothing of a run a hook ended."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import ambit

SECRET = "ghp_pythonHookValue0123456789"


@dataclass(frozen=True)
class User:
    name: str


@ambit.tool(credentials=["github"])
def deploy(ctx: ambit.ToolContext[User]) -> str:
    """Deploys."""
    return f"deployed with {ctx.credential('github')}"


def deploy_model() -> ambit.TestModel:
    return ambit.TestModel([ambit.Reply.tool_call("deploy", {}), "Done."])


def test_hooks_see_the_context_and_credentials_only_redacted() -> None:
    seen: list[tuple[str, str, str]] = []

    def recorder(point: ambit.HookPoint) -> ambit.Hook:
        async def record(ctx: ambit.HookContext[User], payload: dict[str, Any]) -> None:
            seen.append((point, ctx.context.name, json.dumps(payload)))
        return ambit.Hook(point, record, name=f"record_{point}")

    points: list[ambit.HookPoint] = ["run_start", "before_model_request", "after_model_response",
                                     "before_tool_call", "after_tool_call", "run_end"]
    agent = ambit.Agent(model=deploy_model(), tools=[deploy], credentials=ambit.Credentials().value("github", SECRET),
                        hooks=[recorder(p) for p in points])
    result = agent.run_sync("Deploy.", context=User("ada"))
    # Negative control: the tool read the value (the model sees it redacted too).
    assert result.tool_calls[0].result == "deployed with [credential:github]"
    assert [p for p, _, _ in seen] == ["run_start", "before_model_request", "after_model_response",
                                       "before_tool_call", "after_tool_call", "before_model_request",
                                       "after_model_response", "run_end"]
    assert all(user == "ada" for _, user, _ in seen)
    everything = "".join(p for _, _, p in seen)
    assert "deployed with [credential:github]" in everything
    assert SECRET not in everything


def test_a_hook_raising_before_any_tool_ran_is_hook_failed_and_the_session_keeps_nothing(tmp_path: Path) -> None:
    def explode(ctx: ambit.HookContext[Any], payload: dict[str, Any]) -> ambit.HookResult:
        raise ValueError("boom")

    def agent(raising: bool) -> ambit.Agent:
        return ambit.Agent(model=deploy_model(), tools=[deploy],
                           credentials=ambit.Credentials().value("github", SECRET),
                           hooks=[ambit.Hook("before_tool_call", explode)] if raising else [])

    async def main() -> None:
        sessions = await ambit.Sessions.open(f"sqlite://{tmp_path}/s.db")
        sid = await sessions.create()
        await sessions.run(ambit.Agent(model=ambit.TestModel(["Hello."])), sid, "Hi.")
        before = await sessions.entries(sid)
        with pytest.raises(ambit.HookFailed) as info:
            await sessions.run(agent(True), sid, "Deploy.")
        assert info.value.code == "hook_failed" and info.value.hook == "explode"
        assert info.value.point == "before_tool_call"
        assert "hook 'explode' (before_tool_call) failed: boom" in str(info.value)
        assert await sessions.entries(sid) == before
        # Negative control: without the hook the run's turn is stored.
        await sessions.run(agent(False), sid, "Deploy.")
        assert len(await sessions.entries(sid)) == len(before) + 4
    asyncio.run(main())


def test_guardrails_are_typed() -> None:
    def no_deploys(ctx: ambit.HookContext[Any], payload: dict[str, Any]) -> ambit.GuardrailVerdict:
        return ambit.GuardrailVerdict(tripped="deploy" in payload["input"].lower(), info={"rule": "no deploys"})

    agent = ambit.Agent(model=deploy_model(), tools=[deploy], credentials=ambit.Credentials().value("github", SECRET),
                        input_guardrails=[ambit.Guardrail(no_deploys)])
    with pytest.raises(ambit.GuardrailTripped) as info:
        agent.run_sync("Deploy.")
    assert (info.value.guardrail, info.value.kind, info.value.verdict) == ("no_deploys", "input",
                                                                           {"rule": "no deploys"})
    with pytest.raises(ambit.ConfigError, match="no hook point 'before_lunch'"):
        ambit.Hook("before_lunch", no_deploys)  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match=r"hooks\[0\] must be an ambit.Hook"):
        ambit.Agent(model=deploy_model(), hooks=[no_deploys])  # type: ignore[list-item]


def test_the_readme_example_runs_as_written() -> None:
    import sys
    repo = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(repo / "tests" / "packages"))
    from readme_block import block  # type: ignore[import-not-found]
    code = block((repo / "README.md").read_text(encoding="utf-8"), "Hooks and guardrails: your code on the way of a run",
                 "python", 1)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
