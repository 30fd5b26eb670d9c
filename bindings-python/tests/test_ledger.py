"""The work ledger from Python, on SQLite: claim -> record -> list, and an atomic batch rejected whole."""

import asyncio

import pytest

import ambit
from ambit.ledger import GrantReason, InvalidBatch, Ledger, NotClaimed, ScopePinned, SkipReason, StaleToken


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
        ledger = await Ledger.open(f"sqlite://{tmp_path}/ledger.db")
        first = await ledger.claim("a", ["X"], limit=1, run_id="r1", routine_id="rt", lease_seconds=0.05)
        with pytest.raises(ScopePinned) as info:
            await ledger.claim("b", ["X"], limit=1, run_id="r2", routine_id="rt")
        assert info.value.pinned_scope == "a"
        await asyncio.sleep(0.1)
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
