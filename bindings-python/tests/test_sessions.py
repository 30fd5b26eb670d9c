"""Sessions from Python: runs continue the log, compaction summarises without deleting, and the session
tools reach the archive. The core's own suite runs the same on PostgreSQL too."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

import ambit

STORES = ["sqlite"] + (["postgres"] if os.environ.get("AMBIT_TEST_POSTGRES_URL") else [])


def script(tmp_path: Path, exchanges: list[dict[str, Any]]) -> Path:
    path = tmp_path / "sessions.json"
    path.write_text(json.dumps({"name": "py_sessions", "exchanges": exchanges}))
    return path


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite://{tmp_path}/sessions.db"
    # Sessions live in their own tables, so the shared test database serves; each test makes new sessions.
    return os.environ["AMBIT_TEST_POSTGRES_URL"]


@pytest.mark.parametrize("kind", STORES)
def test_runs_continue_and_compaction_keeps_everything_searchable(kind: str, tmp_path: Path,
                                                                   start_provider: Any) -> None:
    p = start_provider(script(tmp_path, [
        {"expect": {"messages_count": 1}, "respond": {"content": "Noted."}},
        {"expect": {"messages_count": 3, "messages_tail": [{"role": "user", "content": "Deploy now."}]},
         "respond": {"content": "Deployed."}},
        {"expect": {"messages_count": 2, "tool_names": []}, "respond": {"content": "Where the token is was said."}},
        {"expect": {"messages_count": 4}, "respond": {"tool_calls": [
            {"id": "s", "name": "conversation_search", "arguments": {"query": "vault"}}]}},
        {"respond": {"content": "In vault/ops."}},
    ]))
    asyncio.run(continue_and_compact(kind, tmp_path, p.base_url))


async def continue_and_compact(kind: str, tmp_path: Path, base_url: str) -> None:
    sessions = await ambit.Sessions.open(store_url(kind, tmp_path), keep_recent=1)
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0),
                        builtins=ambit.SESSION_TOOLS)
    sid = await sessions.create()
    await sessions.run(agent, sid, "The auth token is in vault/ops.")
    await sessions.run(agent, sid, "Deploy now.")
    assert await sessions.compact(agent, sid)
    result = await sessions.run(agent, sid, "Where was the token?")
    assert result.output == "In vault/ops."
    assert result.tool_calls[0].result.startswith("#1 user: The auth token is in vault/ops.")
    kinds = [e["kind"] for e in await sessions.entries(sid)]
    assert kinds[:6] == ["message"] * 4 + ["boundary", "summary"]
    assert (await sessions.read(sid, 1)).startswith("#1 user:\nThe auth token is in vault/ops.")
    assert (await sessions.search(sid, "^Dep", is_regex=True)).startswith("#3 user: Deploy now.")


def test_a_missing_session_and_a_bad_url_are_errors(tmp_path: Path) -> None:
    asyncio.run(missing_and_bad(tmp_path))


async def missing_and_bad(tmp_path: Path) -> None:
    sessions = await ambit.Sessions.open(f"sqlite://{tmp_path}/s.db")
    with pytest.raises(ambit.AmbitError) as info:
        await sessions.entries("nope")
    assert info.value.code == "session_not_found"
    with pytest.raises(ambit.AmbitError) as info:
        await ambit.Sessions.open("mysql://x")
    assert info.value.code == "invalid_argument"


@pytest.mark.parametrize("kind", STORES)
def test_a_second_run_on_a_running_session_is_refused_with_session_busy(kind: str, tmp_path: Path,
                                                                       start_provider: Any) -> None:
    p = start_provider(script(tmp_path, [
        {"respond": {"tool_calls": [{"id": "w", "name": "wait", "arguments": {}}]}},
        {"respond": {"content": "first"}},
        {"respond": {"content": "second"}},
    ]))
    asyncio.run(one_run_at_a_time(kind, tmp_path, p.base_url))


async def one_run_at_a_time(kind: str, tmp_path: Path, base_url: str) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @ambit.tool
    async def wait() -> str:
        """Wait until released."""
        entered.set()
        await release.wait()
        return "done"

    sessions = await ambit.Sessions.open(store_url(kind, tmp_path))
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), tools=[wait])
    sid = await sessions.create()
    first = asyncio.create_task(sessions.run(agent, sid, "one"))
    await entered.wait()
    # The first run holds the session while its tool waits: a second is refused, typed.
    with pytest.raises(ambit.SessionBusy) as info:
        await sessions.run(agent, sid, "two")
    assert info.value.code == "session_busy"
    # Asked to wait (busy_wait_ms), a run waits for the session up to its bound, then is refused saying so.
    patient = await ambit.Sessions.open(store_url(kind, tmp_path), busy_wait_ms=200, lease_ms=2000)
    with pytest.raises(ambit.SessionBusy) as info:
        await patient.run(agent, sid, "two")
    assert "waited" in str(info.value)
    # With room to wait, it gets the session once the first run lets it go.
    patient = await ambit.Sessions.open(store_url(kind, tmp_path), busy_wait_ms=60_000)
    second = asyncio.create_task(patient.run(agent, sid, "two"))
    release.set()
    assert (await first).output == "first"
    assert (await second).output == "second"


def test_lease_and_busy_wait_are_checked_by_the_core(tmp_path: Path) -> None:
    async def bad() -> None:
        for kwargs, named in [({"lease_ms": 1}, "lease_ms"), ({"busy_wait_ms": 3_600_001}, "busy_wait_ms")]:
            with pytest.raises(ambit.AmbitError) as info:
                await ambit.Sessions.open(f"sqlite://{tmp_path}/s.db", **kwargs)
            assert info.value.code == "invalid_argument" and named in str(info.value), info.value
    asyncio.run(bad())


@pytest.mark.parametrize("kind", STORES)
def test_two_resumes_of_one_parked_approval_run_the_tool_once(kind: str, tmp_path: Path,
                                                             start_provider: Any) -> None:
    p = start_provider(script(tmp_path, [
        {"respond": {"tool_calls": [{"id": "a", "name": "send_email", "arguments": {"to": "ops@example.com"}}]}},
        {"respond": {"content": "Sent."}},
    ]))
    asyncio.run(resume_once(kind, tmp_path, p.base_url))


async def resume_once(kind: str, tmp_path: Path, base_url: str) -> None:
    sent: list[str] = []

    @ambit.tool(level="read", requires_approval=True)
    async def send_email(to: str) -> str:
        """Send the drafted email."""
        sent.append(to)
        return f"sent to {to}"

    sessions = await ambit.Sessions.open(store_url(kind, tmp_path))
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), tools=[send_email],
                        policy=ambit.Policy(level="read", approvals=lambda request: ambit.Later()))
    sid = await sessions.create()
    with pytest.raises(ambit.AwaitingApproval):
        await sessions.run(agent, sid, "mail ops")
    outcomes = await asyncio.gather(sessions.resume(agent, sid, ambit.Approve()),
                                    sessions.resume(agent, sid, ambit.Approve()), return_exceptions=True)
    done = [o for o in outcomes if isinstance(o, ambit.RunResult)]
    refused = [o for o in outcomes if isinstance(o, ambit.SessionNotParked)]
    assert (len(done), len(refused)) == (1, 1), outcomes
    assert refused[0].code == "session_not_parked"
    assert sent == ["ops@example.com"]
    tool_results = [e for e in await sessions.entries(sid) if e["kind"] == "message"
                    and e["message"]["role"] == "tool"]
    assert [r["message"]["content"] for r in tool_results] == ["sent to ops@example.com"]


def test_idempotent_is_a_tool_option(tmp_path: Path) -> None:
    @ambit.tool(idempotent=True)
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    assert lookup.idempotent and json.loads(lookup._native_entry()[0])["idempotent"] is True
    with pytest.raises(ambit.ConfigError, match="idempotent must be True or False"):
        ambit.tool(idempotent="yes")(lookup.fn)  # type: ignore[arg-type]


@pytest.mark.parametrize(("wire", "name", "model_window", "store_window", "expected"), [
    ("openai_chat", "gpt-4", None, None, 8_192),
    ("openai_chat", "my-local-model", None, None, 32_768),
    ("openai_chat", "gpt-4", 50_000, None, 50_000),
    ("anthropic", "claude-sonnet-4-5", None, None, 200_000),
    ("anthropic", "claude-sonnet-4-5", 9_000, 7_000, 7_000),
])
def test_the_context_window_comes_from_the_model_unless_the_store_names_one(
        wire: str, name: str, model_window: int | None, store_window: int | None, expected: int, tmp_path: Path,
        start_provider: Any) -> None:
    path = tmp_path / "window.json"
    path.write_text(json.dumps({"name": "py_window", "wire": wire, "exchanges": [
        {"respond": {"tool_calls": [{"id": "c", "name": "context_check", "arguments": {}}]}},
        {"respond": {"content": "ok"}},
    ]}))
    p = start_provider(path)
    cls = ambit.Anthropic if wire == "anthropic" else ambit.OpenAIChat
    model = cls(name, base_url=p.base_url, max_retries=0, context_window=model_window)
    asyncio.run(window_report(tmp_path, model, store_window, expected))


async def window_report(tmp_path: Path, model: ambit.Model, store_window: int | None, expected: int) -> None:
    sessions = await ambit.Sessions.open(f"sqlite://{tmp_path}/w.db", context_window=store_window)
    agent = ambit.Agent(model=model, builtins=ambit.SESSION_TOOLS)
    sid = await sessions.create()
    result = await sessions.run(agent, sid, "how full?")
    assert f" of {expected} tokens" in result.tool_calls[0].result, result.tool_calls[0].result


@pytest.mark.parametrize("kind", STORES)
def test_a_handle_whose_clock_passed_the_lease_takes_over_a_stuck_run(kind: str, tmp_path: Path,
                                                                     start_provider: Any) -> None:
    """Sessions on the manual clock of the test hook: while a run holds the session (its tool waits), a
    handle whose clock has not passed the lease is refused with session_busy (the negative control); the
    same handle, its clock moved an hour on, takes the session over (as another process would a dead
    run's), and the first run, once its tool returns, finds it lost."""
    p = start_provider(script(tmp_path, [
        {"respond": {"tool_calls": [{"id": "w", "name": "wait", "arguments": {}}]}},
        {"expect": {"messages_tail": [{"role": "user", "content": "two"}]}, "respond": {"content": "second"}},
    ]))
    asyncio.run(take_over(kind, tmp_path, p.base_url))
    # The first run never asked the model again: it found the session lost before its next turn.
    assert p.state()["served"] == 2 and not p.state()["mismatches"], p.state()


async def take_over(kind: str, tmp_path: Path, base_url: str) -> None:
    import time
    from ambit import _native
    entered, release = asyncio.Event(), asyncio.Event()

    @ambit.tool
    async def wait() -> str:
        """Wait until released."""
        entered.set()
        await release.wait()
        return "done"

    url = store_url(kind, tmp_path)
    live = await ambit.Sessions.open(url)
    agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), tools=[wait])
    sid = await live.create()
    first = asyncio.create_task(live.run(agent, sid, "one"))
    await entered.wait()
    # A clock at the system's time: the live run's lease (30 s, renewed every 10 s) holds.
    clock = _native._TestingClock(int(time.time() * 1000))
    later = ambit.Sessions(await _native._testing_open_sessions(url, json.dumps({}), clock))
    with pytest.raises(ambit.SessionBusy):
        await later.run(agent, sid, "two")
    clock.advance(3_600_000)
    assert (await later.run(agent, sid, "two")).output == "second"
    release.set()
    with pytest.raises(ambit.SessionBusy, match="taken over by another run"):
        await first
