"""Sync twins: every public ``async`` method of the package has a ``*_sync`` twin for code outside asyncio
(``Agent.run_sync``, ``Sessions.run_sync``, ``Ledger.list_sync``, ``Memory.recall_sync``, ...), which
works end to end on a real store and, called inside a running event loop, refuses naming the awaitable to
use instead."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any, Callable

import pytest

import ambit
from ambit.ledger import GrantReason, SkipReason

#: The public classes with async methods. ``Agent.stream`` and ``Deliveries`` are async iterators: a
#: sync twin of an iterator that must keep its event loop between items is not offered.
CLASSES: list[type[Any]] = [ambit.Agent, ambit.Sessions, ambit.Ledger, ambit.Memory, ambit.Routines, ambit.Runner]
ITERATORS = {("Agent", "stream")}


def missing_twins(classes: list[type[Any]]) -> list[str]:
    """``Class.method`` for every public coroutine method (class methods included) without a ``method_sync``."""
    missing = []
    for cls in classes:
        for name, member in inspect.getmembers(cls):
            if name.startswith("_") or (cls.__name__, name) in ITERATORS:
                continue
            if inspect.iscoroutinefunction(member) and not callable(getattr(cls, f"{name}_sync", None)):
                missing.append(f"{cls.__name__}.{name}")
    return missing


def test_every_async_method_has_a_sync_twin() -> None:
    assert missing_twins(CLASSES) == []


def test_negative_control_a_missing_twin_is_reported() -> None:
    class Half:
        async def fetch(self) -> int:
            return 1

        async def store(self) -> None: ...

        def store_sync(self) -> None: ...

        @classmethod
        async def open(cls) -> "Half":
            return cls()

    assert missing_twins([Half]) == ["Half.fetch", "Half.open"]


def test_sessions_sync_twins_run_a_conversation(tmp_path: Path) -> None:
    sessions = ambit.Sessions.open_sync(f"sqlite://{tmp_path}/sessions.db")
    agent = ambit.Agent(model=ambit.TestModel(["Noted: vault/ops.", "It is in vault/ops."]))
    sid = sessions.create_sync()
    assert sessions.run_sync(agent, sid, "The token is in vault/ops.").output == "Noted: vault/ops."
    assert sessions.run_sync(agent, sid, "Where is the token?").output == "It is in vault/ops."
    assert [e["kind"] for e in sessions.entries_sync(sid)] == ["message"] * 4
    assert sessions.search_sync(sid, "Where").startswith("#3 user: Where is the token?")
    assert sessions.read_sync(sid, 2).startswith("#2 assistant:\nNoted: vault/ops.")
    assert sessions.pending_sync(sid) is None
    with pytest.raises(ambit.AmbitError, match="no-such-task") as e:
        sessions.task_result_sync(sid, "no-such-task")
    assert e.value.code == "invalid_argument"


def test_ledger_sync_twins_claim_record_and_list(tmp_path: Path) -> None:
    ledger = ambit.Ledger.open_sync(f"sqlite://{tmp_path}/ledger.db")
    claim = ledger.claim_sync("po", ["PO-1", "PO-2"], limit=1, run_id="run-1")
    assert [c.subject_key for c in claim.granted] == ["PO-1"]
    assert claim["PO-2"].skip_reason is SkipReason.OVER_LIMIT
    done = ledger.record_sync("po", [{"subject_key": "PO-1", "outcome": "productive", "token": claim["PO-1"].token}],
                              run_id="run-1")
    assert [r.subject_key for r in done.recorded] == ["PO-1"]
    assert [r.subject_key for r in ledger.list_sync("po")] == ["PO-1"]
    assert ledger.grant_reason_counts_sync("po").fresh == 1
    assert claim["PO-1"].grant_reason is GrantReason.FRESH


def test_memory_sync_twins_remember_recall_forget(tmp_path: Path) -> None:
    memory = ambit.Memory.open_sync(f"sqlite://{tmp_path}/memory.db")
    saved = memory.remember_sync("clerk", "Refunds over 500 EUR need a second approver.", key="refunds")
    assert saved.created
    assert [m.id for m in memory.recall_sync("clerk", "who approves refunds")] == [saved.memory.id]
    assert [m.key for m in memory.list_sync("clerk")] == ["refunds"]
    assert '"refunds"' in memory.export_sync("clerk")
    assert memory.forget_sync("clerk", key="refunds")
    assert memory.list_sync("clerk") == []


def test_agent_refresh_tools_sync_without_servers_is_a_no_op() -> None:
    agent = ambit.Agent(model=ambit.TestModel(["ok"]))
    agent.refresh_tools_sync()
    assert agent.run_sync("hi").output == "ok"


def twins_inside_a_loop(tmp_path: Path) -> list[tuple[str, Callable[[], object]]]:
    """Each store's twins as a call to make inside a running loop (opened there with the async API)."""
    async def open_all() -> tuple[ambit.Sessions, ambit.Ledger, ambit.Memory]:
        return (await ambit.Sessions.open(f"sqlite://{tmp_path}/s.db"), await ambit.Ledger.open(f"sqlite://{tmp_path}/l.db"),
                await ambit.Memory.open(f"sqlite://{tmp_path}/m.db"))
    sessions, ledger, memory = asyncio.run(open_all())
    agent = ambit.Agent(model=ambit.TestModel(["ok"]))
    return [
        ("open", lambda: ambit.Sessions.open_sync(f"sqlite://{tmp_path}/s.db")),
        ("create", sessions.create_sync),
        ("list", lambda: ledger.list_sync("po")),
        ("recall", lambda: memory.recall_sync("clerk")),
        ("refresh_tools", agent.refresh_tools_sync),
    ]


def test_a_sync_twin_inside_an_event_loop_names_the_awaitable(tmp_path: Path) -> None:
    calls = twins_inside_a_loop(tmp_path)

    async def inside() -> None:
        for name, call in calls:
            with pytest.raises(RuntimeError, match=rf"{name}_sync\(\) was called inside a running event loop; "
                                                   rf"use `await \.\.\.{name}\(\.\.\.\)`"):
                call()
    asyncio.run(inside())
    # The same calls outside the loop work: the refusal is the loop's, not the call's.
    for _, call in calls:
        call()
