"""Every routine scenario file in tests/scenarios/routines/, run from Python on SQLite and PostgreSQL:
the same files the Rust and Node suites run (see the README there)."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

import ambit
from ambit import _native
from ambit.routines import RoutineError, RunContext
from conftest import REPO

FILES = sorted((REPO / "tests" / "scenarios" / "routines").glob("*.json"))
STORES = ["sqlite"] + (["postgres"] if os.environ.get("AMBIT_TEST_POSTGRES_URL") else [])


def subset(want: Any, got: Any, path: str) -> None:
    """`want` within `got`: objects by the keys given (a wanted None matches an absent key), arrays item
    by item with the same length, anything else equal."""
    if isinstance(want, dict):
        assert isinstance(got, dict), (path, got)
        for k, v in want.items():
            subset(v, got.get(k), f"{path}.{k}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(want) == len(got), (path, want, got)
        for i, (w, g) in enumerate(zip(want, got)):
            subset(w, g, f"{path}[{i}]")
    else:
        assert want == got, (path, want, got)


def plain(v: Any) -> Any:
    """A result as the core's JSON: dataclasses as dicts, lists item by item."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def suffixed(d: dict[str, Any], suffix: str) -> dict[str, Any]:
    d = dict(d)
    for key in ("id", "agent"):
        if isinstance(d.get(key), str):
            d[key] = d[key] + suffix
    return d


async def run_file(path: Path, url: str, base_url: str, suffix: str) -> None:
    scenario = json.loads(path.read_text())
    await run_scenario(scenario, url, base_url, suffix)


async def run_scenario(scenario: dict[str, Any], url: str, base_url: str, suffix: str) -> None:
    spec = scenario["routine"]
    clock = _native._TestingClock(spec["clock_ms"])
    routines = ambit.Routines(await _native._testing_open_routines(url, clock), url)
    sessions = ambit.Sessions(await _native._testing_open_sessions(url, json.dumps({}), clock))
    ledger = ambit.Ledger(await _native._testing_open_ledger(url, clock)) if spec.get("ledger") else None

    def make(ctx: RunContext) -> ambit.Agent:
        return ambit.Agent(model=ambit.OpenAIChat("m", base_url=base_url, max_retries=0), routine=ctx)

    runner = ambit.Runner(routines, sessions, agents={f"scenario{suffix}": make}, lease=3600, ledger=ledger)
    for i, step in enumerate(spec["steps"]):
        op = step["op"]
        at = f"step {i} ({op})"
        rid = step.get("id", "") + suffix
        actor = step.get("actor", "scenario")
        got: Any = None
        try:
            # The clock never runs back (a tick may be asked for before it: the negative control's).
            if op == "clock":
                clock.advance(max(0, step["at"] - clock.now_ms()))
                continue
            elif op == "create":
                got = await routines.create(suffixed(step["definition"], suffix), actor=actor)
            elif op == "update":
                got = await routines.update(rid, step["changes"], actor=actor)
            elif op == "get":
                got = await routines.get(rid)
            elif op == "delete":
                got = await routines.delete(rid, actor=actor)
            elif op == "revisions":
                got = await routines.revisions(rid)
            elif op == "runs":
                got = sorted(await routines.runs(rid), key=lambda r: (r.started_at, r.kind))
            elif op == "skipped":
                got = await routines.skipped(rid)
            elif op == "tick":
                clock.advance(max(0, step["at"] - clock.now_ms()))
                got = await runner.tick(step["at"])
                # The runs it started end before the next step.
                await runner.wait_idle()
            else:
                raise AssertionError(f"{at}: unknown op {op!r}")
        except RoutineError as e:
            assert "error" in step, (at, e)
            subset(step["error"], {"code": e.code, "field": getattr(e, "field", None)}, at)
            continue
        assert "error" not in step, (at, "expected an error", got)
        if "expect" in step:
            subset(step["expect"], plain(got), at)


def store_url(store: str) -> str:
    if store == "sqlite":
        return f"sqlite://{tempfile.mkdtemp(prefix='ambit-routines-')}/routines.db"
    return os.environ["AMBIT_TEST_POSTGRES_URL"]


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_routine_scenario(path: Path, store: str, start_provider: Any) -> None:
    provider = start_provider(path)
    asyncio.run(run_file(path, store_url(store), provider.base_url, "-" + uuid.uuid4().hex[:12]))
    state = provider.state()
    assert state["mismatches"] == [] and state["remaining"] == 0, state


def test_a_tick_a_millisecond_early_fails_the_files_that_run_slots(start_provider: Any, tmp_path: Path) -> None:
    caught = 0
    for path in FILES:
        scenario = json.loads(path.read_text())
        moved = copy.deepcopy(scenario)
        for step in moved["routine"]["steps"]:
            if step["op"] == "tick" and step.get("expect", {}).get("started"):
                step["at"] -= 1
                break
        else:
            continue
        file = tmp_path / path.name
        file.write_text(json.dumps(moved))
        provider = start_provider(file)
        with pytest.raises(AssertionError):
            asyncio.run(run_scenario(moved, store_url("sqlite"), provider.base_url, "-" + uuid.uuid4().hex[:12]))
        caught += 1
    assert caught >= 5
