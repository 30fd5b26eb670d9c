"""Routines from Python (SPEC §13): definitions with revisions credited to actors, every validation error
as InvalidRoutine naming its field, and a Runner whose agent factory is a Python function, on the sync
twins and on asyncio. The core's own suite runs the multi-process guarantees on both stores."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest

import ambit
from ambit.routines import InvalidRoutine, RoutineNotFound, RunContext

STORES = ["sqlite"] + (["postgres"] if os.environ.get("AMBIT_TEST_POSTGRES_URL") else [])


def store_url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite://{tmp_path}/routines.db"
    # Each test uses agent names of its own, so the shared test database serves.
    return os.environ["AMBIT_TEST_POSTGRES_URL"]


@pytest.mark.parametrize("kind", STORES)
def test_definitions_revisions_and_every_validation_error(kind: str, tmp_path: Path) -> None:
    routines = ambit.Routines.open_sync(store_url(kind, tmp_path))
    agent = f"py-{uuid.uuid4().hex[:8]}"
    r = routines.create_sync({"agent": agent, "instructions": "Chase POs.", "interval_seconds": 1800,
                              "title": "POs", "daily_cap": 5}, actor="alice")
    assert (r.revision, r.catch_up, r.parallel_limit, r.next_slot) == (1, 1, None, r.created_at)
    r2 = routines.update_sync(r.id, {"instructions": "Chase the five oldest POs.", "title": None}, actor="bob")
    assert (r2.revision, r2.title, r2.next_slot) == (2, None, r.next_slot), "rewording keeps the slot"
    r3 = routines.update_sync(r.id, {"cron_expression": "0 9 * * 1-5", "timezone": "Europe/Paris"}, actor="carol")
    assert r3.interval_seconds is None and r3.next_slot != r.next_slot, "a schedule change reschedules"
    got = routines.get_sync(r.id)
    assert [(v.revision, v.actor) for v in got.revisions] == [(1, "alice"), (2, "bob"), (3, "carol")]
    assert got.revisions[0].definition["instructions"] == "Chase POs."
    assert [x.id for x in routines.list_sync(agent)] == [r.id]

    base = {"agent": agent, "instructions": "go", "interval_seconds": 60}
    window = {"weekdays": ["mon"], "start": "17:00", "end": "09:00", "timezone": "UTC"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({**base, "interval_seconds": None, "cron_expression": "61 * * * *"}, "cron_expression"),
        ({**base, "interval_seconds": None, "cron_expression": "0 9 * * *", "timezone": "Mars/Base"}, "timezone"),
        ({**base, "interval_seconds": 0}, "interval_seconds"),
        ({**base, "active_window": window}, "active_window"),
        ({**base, "daily_cap": -1}, "daily_cap"),
        ({**base, "parallel_limit": 0}, "parallel_limit"),
        ({**base, "catch_up": 0}, "catch_up"),
        ({**base, "colour": "red"}, "colour"),
    ]
    for definition, field in cases:
        with pytest.raises(InvalidRoutine) as e:
            routines.create_sync(definition, actor="alice")
        assert e.value.field == field, (definition, str(e.value))
        assert e.value.code == "invalid_argument"
    with pytest.raises(InvalidRoutine) as e:
        routines.update_sync(r.id, {"agent": "someone-else"}, actor="bob")
    assert e.value.field == "agent"
    with pytest.raises(InvalidRoutine):
        routines.create_sync("not a mapping", actor="alice")  # type: ignore[arg-type]

    routines.delete_sync(r.id, actor="dave")
    with pytest.raises(RoutineNotFound):
        routines.get_sync(r.id)
    assert [v.change for v in routines.revisions_sync(r.id)] == ["create", "update", "update", "delete"]


def test_a_sync_twin_inside_an_event_loop_says_what_to_do(tmp_path: Path) -> None:
    async def inside() -> None:
        routines = await ambit.Routines.open(store_url("sqlite", tmp_path))
        with pytest.raises(RuntimeError, match="inside a running event loop"):
            routines.list_sync()
    asyncio.run(inside())


@pytest.mark.parametrize("kind", STORES)
def test_a_runner_runs_a_python_agent_and_records_its_outcome(kind: str, tmp_path: Path, start_provider: Any) -> None:
    path = tmp_path / "routine.json"
    path.write_text(json.dumps({"name": "py_routine", "exchanges": [
        {"expect": {"tool_names": ["report_outcome", "list_my_routines", "list_my_outcomes"]},
         "respond": {"tool_calls": [{"id": "r", "name": "report_outcome",
                                     "arguments": {"status": "nothing_to_do", "summary": "No PO lacked tracking."}}]}},
        {"respond": {"content": "Done."}},
    ]}))
    p = start_provider(path)
    asyncio.run(run_one(store_url(kind, tmp_path), p.base_url))


async def run_one(url: str, base_url: str) -> None:
    routines = await ambit.Routines.open(url)
    sessions = await ambit.Sessions.open(url)
    name = f"py-{uuid.uuid4().hex[:8]}"
    r = await routines.create({"agent": name, "instructions": "Chase POs.", "interval_seconds": 3600}, actor="alice")
    seen: list[RunContext] = []

    def make(ctx: RunContext) -> ambit.Agent:
        seen.append(ctx)
        return ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), routine=ctx)

    runner = ambit.Runner(routines, sessions, agents={name: make}, lease=30)
    report = await runner.tick(r.created_at)
    assert [x.routine_id for x in report.started] == [r.id]
    await runner.wait_idle()
    assert seen[0].routine.id == r.id and seen[0].run.slot_at == r.created_at
    (run,) = await routines.runs(r.id)
    assert (run.state, run.outcome, run.summary) == ("finished", "nothing_to_do", "No PO lacked tracking.")
    assert run.runner == runner.id
    entries = await sessions.entries(run.session_id)
    assert entries[-1]["message"]["content"] == "Done.", "the run is an ordinary session run"
    again = await runner.tick(r.created_at)
    assert again.started == [], "the slot ran once"
    with pytest.raises(TypeError):
        ambit.Runner(routines, sessions, agents={name: "not a factory"})  # type: ignore[dict-item]


def test_a_runner_with_a_ledger_gives_each_run_the_ledger_tools(tmp_path: Path, start_provider: Any) -> None:
    path = tmp_path / "routine_ledger.json"
    path.write_text(json.dumps({"name": "py_routine_ledger", "exchanges": [
        {"expect": {"tool_names": ["report_outcome", "list_my_routines", "list_my_outcomes", "claim_work",
                                   "record_work", "list_work_ledger", "report_backlog"]},
         "respond": {"content": "Nothing reported."}},
    ]}))
    p = start_provider(path)

    async def go() -> None:
        url = store_url("sqlite", tmp_path)
        routines = await ambit.Routines.open(url)
        sessions = await ambit.Sessions.open(url)
        ledger = await ambit.Ledger.open(url)
        r = await routines.create({"agent": "py", "instructions": "Chase POs.", "interval_seconds": 60}, actor="a")
        runner = ambit.Runner(routines, sessions, ledger=ledger, agents={
            "py": lambda ctx: ambit.Agent(model=ambit.OpenAIChat("m", base_url=p.base_url, max_retries=0),
                                          routine=ctx)})
        await runner.tick(r.created_at)
        await runner.wait_idle()
        (run,) = await routines.runs(r.id)
        assert (run.state, run.outcome) == ("finished", "unknown"), "a run that never reports is unknown"
    asyncio.run(go())
