"""The work ledger from Python: claim -> record -> list, an atomic batch rejected whole, and (on the manual
clock of the test hook, on SQLite and PostgreSQL) report_backlog and drain_decision over time."""

import asyncio
import os
import uuid

import pytest

import ambit
from ambit import _native
from ambit.ledger import (
    DrainDecision, GrantReason, InvalidBatch, InvalidLedgerArgument, Ledger, NotClaimed, RoutineLimits, ScopePinned,
    SkipReason, StaleToken,
)

#: 2026-01-01T00:00:00Z, and an hour, in milliseconds.
T0, HOUR = 1_767_225_600_000, 3_600_000
STORES = ["sqlite"] + (["postgres"] if os.environ.get("AMBIT_TEST_POSTGRES_URL") else [])


def run(coro):
    return asyncio.run(coro)


def test_claim_record_list(tmp_path):
    async def main():
        ledger = await ambit.Ledger.open(f"sqlite://{tmp_path}/ledger.db")
        claim = await ledger.claim("po.tracking", ["PO-1", "PO-2", "PO-3"], limit=2, run_id="run-1")
        assert [c.grant_reason for c in claim.granted] == [GrantReason.FRESH, GrantReason.FRESH]
        assert claim["PO-3"].skip_reason is SkipReason.OVER_LIMIT and not claim["PO-3"].granted
        again = await ledger.claim("po.tracking", ["PO-1"], limit=1, run_id="run-2")
        assert again["PO-1"].skip_reason is SkipReason.IN_FLIGHT

        done = await ledger.record(
            "po.tracking",
            [{"subject_key": "PO-1", "outcome": "empty", "token": claim["PO-1"].token},
             {"subject_key": "PO-2", "outcome": ambit.ledger.Outcome.PRODUCTIVE}],
            run_id="run-1",
        )
        assert [(r.subject_key, r.misses) for r in done.recorded] == [("PO-1", 1), ("PO-2", 0)]

        rows = await ledger.list("po.tracking")
        assert [r.subject_key for r in rows] == ["PO-1", "PO-2"]
        assert all(r.state is ambit.ledger.EntryState.COOLING_DOWN for r in rows)
        assert rows[0].last_grant_reason is GrantReason.FRESH
        assert await ledger.list("po.tracking", state="eligible") == []
        counts = await ledger.grant_reason_counts("po.tracking")
        assert (counts.fresh, counts.fingerprint_changed) == (2, 0)
        cooling = await ledger.claim("po.tracking", ["PO-1"], limit=1)
        assert cooling["PO-1"].skip_reason is SkipReason.COOLING_DOWN
        assert cooling["PO-1"].eligible_at == rows[0].eligible_at

    run(main())


def test_a_bad_batch_is_rejected_whole(tmp_path):
    async def main():
        ledger = await Ledger.open(f"sqlite://{tmp_path}/ledger.db")
        claim = await ledger.claim("s", ["A", "B"], limit=2, run_id="run-1")
        for bad, error in [
            ([{"subject_key": "A", "outcome": "empty"}, {"subject_key": "B", "outcome": "done"}], InvalidBatch),
            ([{"subject_key": "A", "outcome": "empty"}, {"outcome": "empty"}], InvalidBatch),
            ([{"subject_key": "A", "outcome": "empty"}, {"subject_key": "A", "outcome": "failed"}], InvalidBatch),
            ([{"subject_key": "A", "outcome": "empty"}, {"subject_key": "C", "outcome": "empty"}], NotClaimed),
        ]:
            with pytest.raises(error) as info:
                await ledger.record("s", bad, run_id="run-1")
            assert info.value.code == error.code
            assert isinstance(info.value, ambit.AmbitError)
        # Nothing was written: both subjects are still in flight with their first grant.
        rows = await ledger.list("s")
        assert [(r.subject_key, r.state.value, r.attempts, r.misses) for r in rows] == [
            ("A", "in_flight", 1, 0), ("B", "in_flight", 1, 0)]
        await ledger.record("s", [{"subject_key": k.subject_key, "outcome": "released", "token": k.token} for k in claim.granted])

    run(main())


def test_scope_pinning_and_stale_tokens(tmp_path):
    async def main():
        clock = _native._TestingClock(T0)
        ledger = Ledger(await _native._testing_open_ledger(f"sqlite://{tmp_path}/ledger.db", clock))
        first = await ledger.claim("a", ["X"], limit=1, run_id="r1", routine_id="rt", lease_seconds=0.05)
        with pytest.raises(ScopePinned) as info:
            await ledger.claim("b", ["X"], limit=1, run_id="r2", routine_id="rt")
        assert info.value.pinned_scope == "a"
        clock.advance(50)
        second = await ledger.claim("a", ["X"], limit=1, run_id="r2", routine_id="rt")
        assert second["X"].grant_reason is GrantReason.COOLDOWN_EXPIRED
        with pytest.raises(StaleToken) as stale:
            await ledger.record("a", [{"subject_key": "X", "outcome": "empty", "token": first["X"].token}])
        assert stale.value.subject_key == "X"
        report = await ledger.report_backlog("rt", ["X", "Y", "Z"], 1, limits=ambit.ledger.RoutineLimits(parallel_limit=4))
        assert (report.workable, report.extra_runs, report.scope) == (2, 2, "a")

    run(main())


def test_bad_urls_raise_typed_errors():
    with pytest.raises(ambit.ledger.InvalidLedgerArgument):
        run(Ledger.open("mysql://nope"))


def test_agent_gets_the_ledger_tools_of_a_routine_run(tmp_path):
    ledger = run(Ledger.open(f"sqlite://{tmp_path}/ledger.db"))
    routine = ledger.for_routine("po.tracking", run_id="run-1", routine_id="po-tracker", limit=3)
    assert routine.tool_names == ["claim_work", "record_work", "list_work_ledger", "report_backlog"]
    assert (routine.scope, routine.routine_id, routine.run_id) == ("po.tracking", "po-tracker", "run-1")
    agent = ambit.Agent(model="gpt-4.1", ledger=routine)
    assert [t.name for t in agent.list_tools()] == routine.tool_names
    with pytest.raises(TypeError, match="for_routine"):
        ambit.Agent(model="gpt-4.1", ledger=ledger)


async def clocked(store: str, tmp_path) -> tuple[Ledger, object, str]:
    """A ledger on a manual clock at T0 (the test hook), and the suffix its keys get on that store."""
    clock = _native._TestingClock(T0)
    if store == "sqlite":
        url, sfx = f"sqlite://{tmp_path}/ledger.db", ""
    else:
        url, sfx = os.environ["AMBIT_TEST_POSTGRES_URL"], "-" + uuid.uuid4().hex[:16]
    return Ledger(await _native._testing_open_ledger(url, clock)), clock, sfx


@pytest.mark.parametrize("store", STORES)
def test_report_backlog_and_drain_decision_over_time(store, tmp_path):
    """Through the public API: the backlog counts what is workable at the clock's time (a cooldown ends
    exactly on time), the extra runs follow the routine's limits, and the drain stops for each reason,
    report_stale a millisecond after the report is an hour old (exactly an hour: still on)."""
    async def main():
        ledger, clock, sfx = await clocked(store, tmp_path)
        rt, scope = "po-tracker" + sfx, "po" + sfx
        queue = [f"PO-{i}" for i in range(6)]
        # Nothing claimed: every subject workable, the scope not yet pinned.
        report = await ledger.report_backlog(rt, queue, 2, limits=RoutineLimits(parallel_limit=8), run_id="run-0" + sfx)
        assert (report.workable, report.extra_runs, report.scope) == (6, 3, None)
        # run-1 claims two and records one empty (cooling for 6 h): four workable.
        claim = await ledger.claim(scope, queue[:2], limit=2, run_id="run-1" + sfx, routine_id=rt)
        await ledger.record(scope, [{"subject_key": "PO-0", "outcome": "empty"}], run_id="run-1" + sfx)
        assert [c.grant_reason for c in claim.candidates] == [GrantReason.FRESH, GrantReason.FRESH]
        report = await ledger.report_backlog(rt, queue, 1, run_id="run-1" + sfx,
                                             limits={"parallel_limit": 3, "running": 1})
        assert (report.workable, report.extra_runs, report.scope) == (4, 2, scope)
        assert await ledger.drain_decision(rt, "run-1" + sfx) == DrainDecision(stop=None, start_runs=1)
        # The daily cap reached: the drain goes on but starts nothing; a parallel limit of one frees the
        # finished run's slot.
        full = RoutineLimits(daily_cap=5, started_today=5)
        assert await ledger.drain_decision(rt, "run-1" + sfx, limits=full) == DrainDecision(None, 0)
        # Exactly an hour after the report: still on; a millisecond later: stale.
        clock.advance(HOUR)
        assert (await ledger.drain_decision(rt, "run-1" + sfx)).stop is None
        clock.advance(1)
        assert await ledger.drain_decision(rt, "run-1" + sfx) == DrainDecision("report_stale", 0)
        # A run that claimed nothing, and one that claimed but never reported.
        assert (await ledger.drain_decision(rt, "run-2" + sfx)).stop == "queue_empty"
        await ledger.claim(scope, ["PO-5"], limit=1, run_id="run-3" + sfx, routine_id=rt)
        assert (await ledger.drain_decision(rt, "run-3" + sfx)).stop == "run_did_not_report"
        # PO-1's lease (1 h) ran out: it is workable again; PO-0 cools until T0 + 6 h, exactly.
        clock.advance(5 * HOUR - 2)
        cooling = await ledger.report_backlog(rt, ["PO-0"], 1, run_id="run-3" + sfx)
        assert cooling.workable == 0
        assert await ledger.drain_decision(rt, "run-3" + sfx) == DrainDecision("nothing_workable", 0)
        clock.advance(1)
        report = await ledger.report_backlog(rt, ["PO-0", "PO-1"], 1, run_id="run-3" + sfx)
        assert (report.workable, report.extra_runs) == (2, 0)
        assert await ledger.drain_decision(rt, "run-3" + sfx) == DrainDecision(None, 1)

    run(main())


def test_report_backlog_and_drain_decision_refuse_bad_input(tmp_path):
    """Every bad argument is a typed error naming it; nothing is reported."""
    async def main():
        ledger, _, _ = await clocked("sqlite", tmp_path)
        refused = [
            (ledger.report_backlog("rt", ["A"], 0), "batch_size must be from 1 to 4294967295, got 0"),
            (ledger.report_backlog("rt", ["A"], -1), "batch_size must be from 1 to 4294967295, got -1"),
            (ledger.report_backlog("rt", ["A", ""], 1), "subject_keys[1] is empty"),
            (ledger.report_backlog("rt", ["A\0"], 1), "a subject key contains a NUL byte"),
            (ledger.report_backlog("", ["A"], 1), "routine_id is empty"),
            (ledger.report_backlog("rt", ["A"], 1, run_id=""), "run_id is empty"),
            (ledger.report_backlog("rt", ["A"], 1, limits={"parallel_limt": 2}), "unknown routine limit 'parallel_limt'"),
            (ledger.report_backlog("rt", ["A"], 1, limits=RoutineLimits(parallel_limit=-1)),
             "parallel_limit must be a whole number from 0 to 4294967295, got -1"),
            (ledger.drain_decision("", "run-1"), "routine_id is empty"),
            (ledger.drain_decision("rt", ""), "run_id is empty"),
            (ledger.drain_decision("rt", "run-1", limits=RoutineLimits(daily_cap=-3)),
             "daily_cap must be a whole number from 0 to 4294967295 or null, got -3"),
            (ledger.drain_decision("rt", "run-1", limits={"running": "1"}), "running must be a whole number"),
        ]
        for call, message in refused:
            with pytest.raises(InvalidLedgerArgument) as info:
                await call
            assert message in str(info.value) and info.value.code == "ledger_invalid_argument", info.value
        with pytest.raises(ambit.ConfigError, match=r"subject_keys\[0\] must be a string"):
            await ledger.report_backlog("rt", [1], 1)  # type: ignore[list-item]
        with pytest.raises(TypeError, match="limits must be a RoutineLimits"):
            await ledger.drain_decision("rt", "run-1", limits=3)  # type: ignore[arg-type]
        # Nothing was reported: the routine's drain still says no run reported.
        assert (await ledger.drain_decision("rt", "run-1")).stop == "queue_empty"

    run(main())


def test_the_testing_clock_never_runs_backwards():
    clock = _native._TestingClock(T0)
    assert clock.advance(0) == T0 and clock.advance(HOUR) == T0 + HOUR
    with pytest.raises(InvalidLedgerArgument, match="at least 0, got -1"):
        clock.advance(-1)
    assert clock.now_ms() == T0 + HOUR
    with pytest.raises(InvalidLedgerArgument, match="start_ms"):
        _native._TestingClock(-5)
