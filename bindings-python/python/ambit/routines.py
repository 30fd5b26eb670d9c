"""Routines: standing work on a schedule, run by any number of runner processes over one store (SPEC §13).

    routines = await ambit.Routines.open("sqlite:///var/lib/app/routines.db")   # or postgres://...
    r = await routines.create({"agent": "po-chaser", "instructions": "Chase the five oldest POs.",
                                "interval_seconds": 1800}, actor="alice")
    sessions = await ambit.Sessions.open("sqlite:///var/lib/app/sessions.db")
    runner = ambit.Runner(routines, sessions, agents={"po-chaser": make_agent})
    await runner.run_forever()            # or: report = await runner.tick()

``make_agent(ctx)`` gets a :class:`RunContext` (the routine, the run, and the run's tools, to pass as
``Agent(routine=ctx)``) and returns an :class:`ambit.Agent`. Every rule lives in the Rust core; this
module turns its JSON into dataclasses and its errors into exceptions with the same ``code`` as every
other language. Times are milliseconds since the Unix epoch. Every ``async`` method has a ``*_sync``
twin for code outside asyncio.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, TYPE_CHECKING

from . import _native
from ._aio import sync as _sync
from .errors import AmbitError

if TYPE_CHECKING:
    from . import Agent
    from .ledger import Ledger
    from .session import Sessions

__all__ = [
    "Routines", "Runner", "RunContext", "Routine", "Revision", "RunRecord", "SkippedSlots", "TickReport",
    "RoutineError", "InvalidRoutine", "RoutineNotFound", "RoutineStoreError",
]


class RoutineError(AmbitError):
    """A routine call refused or failed."""

    code = "routine_store"


class InvalidRoutine(RoutineError, ValueError):
    """A field of a definition or an update is wrong; ``field`` names it."""

    code = "invalid_argument"
    field: str = ""


class RoutineNotFound(RoutineError, KeyError):
    """No routine with that id."""

    code = "routine_not_found"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class RoutineStoreError(RoutineError):
    """The store failed: unreachable, I/O, a migration that does not apply."""

    code = "routine_store"


_BY_CODE: dict[str, type[RoutineError]] = {c.code: c for c in (InvalidRoutine, RoutineNotFound, RoutineStoreError)}


def _from_core(code: str, message: str, details: Mapping[str, Any]) -> RoutineError:
    """Called by the native module to turn a routine error into its exception."""
    exc = _BY_CODE.get(code, RoutineError)(message, code=code)
    for key, value in details.items():
        setattr(exc, key, value)
    return exc


@dataclass(frozen=True)
class Revision:
    """One definition change, credited to the actor the host named."""

    revision: int
    actor: str
    at: int
    change: str
    definition: dict[str, Any]


@dataclass(frozen=True)
class Routine:
    """A stored routine: its definition, its revision, and its next slot (``None`` while paused)."""

    id: str
    agent: str
    instructions: str
    enabled: bool
    catch_up: int
    revision: int
    created_at: int
    updated_at: int
    title: Optional[str] = None
    interval_seconds: Optional[int] = None
    cron_expression: Optional[str] = None
    timezone: Optional[str] = None
    active_window: Optional[dict[str, Any]] = None
    parallel_limit: Optional[int] = None
    daily_cap: Optional[int] = None
    model: Optional[str] = None
    next_slot: Optional[int] = None
    revisions: list[Revision] = field(default_factory=list)


@dataclass(frozen=True)
class RunRecord:
    """One run of a routine. ``state`` is running, parked, finished or lost; ``outcome`` success,
    nothing_to_do, failure, error or unknown."""

    id: str
    routine_id: str
    revision: int
    kind: str
    state: str
    runner: str
    session_id: str
    started_at: int
    input_tokens: int
    output_tokens: int
    slot_at: Optional[int] = None
    ended_at: Optional[int] = None
    outcome: Optional[str] = None
    summary: Optional[str] = None
    tool_calls: Optional[int] = None
    tool_errors: Optional[int] = None
    cost: Optional[float] = None


@dataclass(frozen=True)
class SkippedSlots:
    """Slots that were not run: ``missed`` (beyond catch-up), ``daily_cap``, ``window`` (outside the active
    window) or ``disabled`` (while the routine was disabled)."""

    routine_id: str
    first_slot: int
    last_slot: int
    slots: int
    reason: str
    at: int


@dataclass(frozen=True)
class TickReport:
    """What one tick did."""

    started: list[RunRecord]
    lost: list[RunRecord]
    skipped: list[SkippedSlots]
    #: Parked runs whose session a resume ended since: now finished.
    resumed: list[RunRecord] = field(default_factory=list)


def _routine(d: Mapping[str, Any]) -> Routine:
    d = dict(d)
    revisions = [Revision(**r) for r in d.pop("revisions", [])]
    return Routine(**d, revisions=revisions)


def _run(d: Mapping[str, Any]) -> RunRecord:
    return RunRecord(**d)


def _definition(definition: Mapping[str, Any]) -> str:
    if not isinstance(definition, Mapping):
        raise InvalidRoutine(f"invalid routine: must be a mapping of fields, got {type(definition).__name__}",
                             code="invalid_argument")
    return json.dumps(dict(definition))


class Routines:
    """The routine store on SQLite (``sqlite:///path``) or PostgreSQL (``postgres://…``)."""

    def __init__(self, native: Any, url: str) -> None:
        self._native = native
        self.url = url

    @classmethod
    async def open(cls, url: str) -> "Routines":
        """Opens the store, applying its migrations."""
        return cls(await _native.NativeRoutines.open(url), url)

    @classmethod
    def open_sync(cls, url: str) -> "Routines":
        return _sync("open", lambda: cls.open(url))

    async def create(self, definition: Mapping[str, Any], *, actor: str) -> Routine:
        """Creates a routine from its fields (``agent``, ``instructions``, ``interval_seconds`` or
        ``cron_expression`` with ``timezone``, ``active_window``, ``enabled``, ``parallel_limit``,
        ``catch_up``, ``daily_cap``, ``model``, ``title``, optionally ``id``); revision 1, by ``actor``."""
        return _routine(json.loads(await self._native.create(_definition(definition), actor)))

    def create_sync(self, definition: Mapping[str, Any], *, actor: str) -> Routine:
        return _sync("create", lambda: self.create(definition, actor=actor))

    async def get(self, id: str) -> Routine:
        """A routine with its revision history (``revisions``, oldest first)."""
        return _routine(json.loads(await self._native.get(id)))

    def get_sync(self, id: str) -> Routine:
        return _sync("get", lambda: self.get(id))

    async def revisions(self, id: str) -> list[Revision]:
        """The revisions of a routine, also after it was deleted."""
        return [Revision(**r) for r in json.loads(await self._native.revisions(id))]

    def revisions_sync(self, id: str) -> list[Revision]:
        return _sync("revisions", lambda: self.revisions(id))

    async def update(self, id: str, changes: Mapping[str, Any], *, actor: str) -> Routine:
        """Only the fields in ``changes`` change; ``None`` clears the title, a limit, the model or the
        window. A schedule, window or resume change reschedules the next slot; the agent cannot change."""
        return _routine(json.loads(await self._native.update(id, _definition(changes), actor)))

    def update_sync(self, id: str, changes: Mapping[str, Any], *, actor: str) -> Routine:
        return _sync("update", lambda: self.update(id, changes, actor=actor))

    async def delete(self, id: str, *, actor: str) -> None:
        """Removes the routine and its run history; its revisions stay. A run in progress finishes."""
        await self._native.delete(id, actor)

    def delete_sync(self, id: str, *, actor: str) -> None:
        _sync("delete", lambda: self.delete(id, actor=actor))

    async def runs(self, routine_id: Optional[str] = None, limit: int = 100) -> list[RunRecord]:
        """The runs of a routine (or of all), latest first."""
        return [_run(r) for r in json.loads(await self._native.runs(routine_id, limit))]

    def runs_sync(self, routine_id: Optional[str] = None, limit: int = 100) -> list[RunRecord]:
        return _sync("runs", lambda: self.runs(routine_id, limit))

    async def skipped(self, routine_id: Optional[str] = None) -> list[SkippedSlots]:
        """The slots of a routine (or of all) that came due and were skipped."""
        return [SkippedSlots(**s) for s in json.loads(await self._native.skipped(routine_id))]

    def skipped_sync(self, routine_id: Optional[str] = None) -> list[SkippedSlots]:
        return _sync("skipped", lambda: self.skipped(routine_id))

    async def list(self, agent: Optional[str] = None) -> "builtins.list[Routine]":
        """Every routine, or ``agent``'s, by id."""
        return [_routine(r) for r in json.loads(await self._native.list(agent))]

    def list_sync(self, agent: Optional[str] = None) -> "builtins.list[Routine]":
        return _sync("list", lambda: self.list(agent))


@dataclass(frozen=True)
class RunContext:
    """What an agent factory knows of the run: the routine (with its ``model`` override), the run, and
    the run's tools (``report_outcome``, ``list_my_routines``, ``list_my_outcomes``), which
    ``Agent(routine=ctx)`` registers."""

    routine: Routine
    run: RunRecord
    _tools: Any = field(repr=False)


class Runner:
    """Fires the due slots of the routines in a store as session runs. Any number of runners, in any
    number of processes, may share one store."""

    def __init__(self, routines: Routines, sessions: "Sessions", agents: Mapping[str, Callable[[RunContext], "Agent"]],
                 *, lease: float = 60.0, poll: float = 1.0, id: Optional[str] = None,
                 ledger: Optional["Ledger"] = None) -> None:
        """``agents`` maps the routines' agent names to factories; ``lease`` (seconds) is how long a run
        of a runner that died stays held before it is marked lost; ``poll`` how often
        :meth:`run_forever` ticks. With ``ledger`` (an opened :class:`ambit.Ledger`), every run gets the
        work ledger's tools (scope: the routine's id) and a ``report_backlog`` starts a drain: extra runs
        capped by the routine's parallel limit and daily cap, going on until a stop rule says stop."""
        if not isinstance(routines, Routines):
            raise TypeError(f"routines must be an ambit.Routines, got {type(routines).__name__}")
        if not isinstance(agents, Mapping) or not all(isinstance(k, str) and callable(v) for k, v in agents.items()):
            raise TypeError("agents must map agent names to factories (callables taking a RunContext)")
        entries = [(name, _factory(make)) for name, make in agents.items()]
        self._native = _native.NativeRunner(routines._native, sessions._native, entries, lease=float(lease),
                                            poll=float(poll), id=id,
                                            ledger=ledger._native if ledger is not None else None)

    @property
    def id(self) -> str:
        return str(self._native.id())

    async def tick(self, now: Optional[int] = None) -> TickReport:
        """One pass at ``now`` (ms; the clock when omitted): renews this runner's leases, marks lost the
        runs whose lease ran out, claims the due slots and starts their runs in the background, and finishes
        parked runs whose session a resume ended (``resumed``)."""
        d = json.loads(await self._native.tick(now))
        return TickReport(started=[_run(r) for r in d["started"]], lost=[_run(r) for r in d["lost"]],
                          skipped=[SkippedSlots(**s) for s in d["skipped"]], resumed=[_run(r) for r in d["resumed"]])

    def tick_sync(self, now: Optional[int] = None) -> TickReport:
        return _sync("tick", lambda: self.tick(now))

    async def wait_idle(self) -> None:
        """Waits until every run this runner started has ended (finished, parked or failed)."""
        await self._native.wait_idle()

    def wait_idle_sync(self) -> None:
        _sync("wait_idle", self.wait_idle)

    async def run_forever(self) -> None:
        """Ticks until cancelled."""
        await self._native.run_forever()

    def run_forever_sync(self) -> None:
        _sync("run_forever", self.run_forever)


def _factory(make: Callable[[RunContext], "Agent"]) -> Callable[[str, Any], "Agent"]:
    def call(context: str, tools: Any) -> "Agent":
        d = json.loads(context)
        return make(RunContext(routine=_routine(d["routine"]), run=_run(d["run"]), _tools=tools))
    return call
