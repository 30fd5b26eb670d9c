"""The work ledger: effort already spent, and when it is worth spending again (SPEC §9).

    ledger = await ambit.Ledger.open("sqlite:///var/lib/app/ledger.db")   # or postgres://...
    claim = await ledger.claim("po.tracking", ["PO-1", "PO-2"], limit=1, run_id="run-7")
    for g in claim.granted:
        ...
    await ledger.record("po.tracking", [{"subject_key": g.subject_key, "outcome": "empty"}], run_id="run-7")

Every rule lives in the Rust core; this module turns its JSON into dataclasses and enums, and its
errors into exceptions with the same ``code`` as every other language. Times are milliseconds since
the Unix epoch.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Iterable, Mapping, Optional, Union

from . import _native, _options
from ._aio import sync as _sync
from .errors import AmbitError

__all__ = [
    "Ledger", "LedgerError", "InvalidBatch", "StaleToken", "NotClaimed", "ScopePinned", "LedgerStoreError",
    "InvalidLedgerArgument", "GrantReason", "SkipReason", "Outcome", "AttemptOutcome", "EntryState", "Candidate",
    "Labelled", "ClaimResult", "Recorded", "RecordResult", "LedgerEntry", "GrantReasonCounts", "BacklogReport",
    "DrainDecision", "RoutineLimits", "RoutineLedger",
]


class LedgerError(AmbitError):
    """A ledger call refused or failed. A refused batch wrote nothing."""

    code = "ledger_store"


class InvalidBatch(LedgerError, ValueError):
    """An unknown outcome, a missing subject_key or the same subject twice: the whole batch was rejected."""

    code = "ledger_invalid_batch"


class StaleToken(LedgerError):
    """A record for a grant that another run has since reclaimed. ``subject_key`` names it."""

    code = "ledger_stale_token"
    subject_key: str = ""


class NotClaimed(LedgerError):
    """A record for a subject this run never claimed (or already recorded). ``subject_key`` names it."""

    code = "ledger_not_claimed"
    subject_key: str = ""


class ScopePinned(LedgerError):
    """A routine's runs all claim in the scope its first claim pinned (``pinned_scope``)."""

    code = "ledger_scope_pinned"
    routine_id: str = ""
    pinned_scope: str = ""
    scope: str = ""


class InvalidLedgerArgument(LedgerError, ValueError):
    """An argument the ledger cannot use: an empty scope, a zero batch size, a bad URL."""

    code = "ledger_invalid_argument"


class LedgerStoreError(LedgerError):
    """The store failed: unreachable, I/O, a migration that does not apply."""

    code = "ledger_store"


_BY_CODE: dict[str, type[LedgerError]] = {
    c.code: c for c in (InvalidBatch, StaleToken, NotClaimed, ScopePinned, InvalidLedgerArgument, LedgerStoreError)
}


def _from_core(code: str, message: str, details: Mapping[str, Any]) -> LedgerError:
    """Called by the native module to turn a ledger error into its exception."""
    exc = _BY_CODE.get(code, LedgerError)(message, code=code)
    for key, value in details.items():
        setattr(exc, key, value)
    return exc


class GrantReason(str, Enum):
    FRESH = "fresh"
    COOLDOWN_EXPIRED = "cooldown_expired"
    FINGERPRINT_CHANGED = "fingerprint_changed"


class SkipReason(str, Enum):
    IN_FLIGHT = "in_flight"
    COOLING_DOWN = "cooling_down"
    OVER_LIMIT = "over_limit"


class Outcome(str, Enum):
    PRODUCTIVE = "productive"
    EMPTY = "empty"
    FAILED = "failed"
    RELEASED = "released"


class AttemptOutcome(str, Enum):
    PRODUCTIVE = "productive"
    EMPTY = "empty"
    FAILED = "failed"
    RELEASED = "released"
    ABANDONED = "abandoned"


class EntryState(str, Enum):
    IN_FLIGHT = "in_flight"
    COOLING_DOWN = "cooling_down"
    ELIGIBLE = "eligible"


def _enum(kind: type[Enum], value: Optional[str]) -> Any:
    return None if value is None else kind(value)


@dataclass(frozen=True)
class Candidate:
    subject_key: str
    fingerprint: Optional[str] = None


@dataclass(frozen=True)
class Labelled:
    """One candidate of a claim: granted (``grant_reason``, ``token``, ``lease_until``) or skipped
    (``skip_reason``, ``eligible_at`` when known)."""

    subject_key: str
    granted: bool
    grant_reason: Optional[GrantReason] = None
    token: Optional[int] = None
    lease_until: Optional[int] = None
    skip_reason: Optional[SkipReason] = None
    eligible_at: Optional[int] = None


@dataclass(frozen=True)
class ClaimResult:
    scope: str
    candidates: list[Labelled]

    @property
    def granted(self) -> list[Labelled]:
        return [c for c in self.candidates if c.granted]

    def __getitem__(self, subject_key: str) -> Labelled:
        for c in self.candidates:
            if c.subject_key == subject_key:
                return c
        raise KeyError(subject_key)


@dataclass(frozen=True)
class Recorded:
    subject_key: str
    outcome: Outcome
    attempts: int
    misses: int
    eligible_at: Optional[int]
    escalate: bool


@dataclass(frozen=True)
class RecordResult:
    scope: str
    recorded: list[Recorded]
    escalate: list[str]


@dataclass(frozen=True)
class LedgerEntry:
    scope: str
    subject_key: str
    state: EntryState
    eligible_at: Optional[int]
    last_outcome: Optional[AttemptOutcome]
    last_grant_reason: Optional[GrantReason]
    attempts: int
    misses: int
    claim_token: int
    escalate: bool
    routine_id: Optional[str]
    last_attempt_at: Optional[int]


@dataclass(frozen=True)
class GrantReasonCounts:
    fresh: int
    cooldown_expired: int
    fingerprint_changed: int


@dataclass(frozen=True)
class BacklogReport:
    routine_id: str
    scope: Optional[str]
    workable: int
    extra_runs: int


@dataclass(frozen=True)
class DrainDecision:
    stop: Optional[str]
    start_runs: int


@dataclass(frozen=True)
class RoutineLimits:
    parallel_limit: int = 1
    daily_cap: Optional[int] = None
    running: int = 1
    started_today: int = 0


def _limits_json(limits: Any) -> str:
    """A routine's limits as the core reads them: a :class:`RoutineLimits`, or a mapping of its fields
    (the core refuses an unknown one, naming it)."""
    if isinstance(limits, RoutineLimits):
        return json.dumps(asdict(limits))
    if isinstance(limits, Mapping):
        return json.dumps(dict(limits))
    raise TypeError(f"limits must be a RoutineLimits (or a mapping of its fields), got {type(limits).__name__}")


def _candidate(c: Union[str, Candidate, Mapping[str, Any]]) -> dict[str, Any]:
    if isinstance(c, str):
        return {"subject_key": c}
    if isinstance(c, Candidate):
        return {k: v for k, v in asdict(c).items() if v is not None}
    return dict(c)


def _checked(*types: type[Any]) -> Any:
    def check(value: Any) -> Any:
        if not isinstance(value, types):
            raise TypeError
        return value
    return check


def _record(r: Any) -> Any:
    if isinstance(r, Mapping):
        out = dict(r)
        if isinstance(out.get("outcome"), Enum):
            out["outcome"] = out["outcome"].value
        return out
    return r


class RoutineLedger:
    """The ledger's four agent tools (``claim_work``, ``record_work``, ``list_work_ledger``,
    ``report_backlog``) bound to one run of a routine: ``ambit.Agent(..., ledger=routine)``. The scope,
    routine id, run id and claim tokens are filled in by the SDK, never by the model."""

    def __init__(self, native: Any, scope: str, routine_id: Optional[str], run_id: str) -> None:
        self._native = native
        self.scope = scope
        self.routine_id = routine_id
        self.run_id = run_id

    @property
    def tool_names(self) -> list[str]:
        return list(self._native.names())

    def __repr__(self) -> str:
        return f"RoutineLedger(scope={self.scope!r}, routine_id={self.routine_id!r}, run_id={self.run_id!r})"


class Ledger:
    """The work ledger on SQLite (``sqlite:///path``) or PostgreSQL (``postgres://…``)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    async def open(cls, url: str, *, durability: str = "full") -> "Ledger":
        """Opens the ledger, applying its migrations. ``durability="fast"`` trades durability for speed."""
        return cls(await _native.NativeLedger.open(url, durability))

    @classmethod
    def open_sync(cls, url: str, *, durability: str = "full") -> "Ledger":
        """:meth:`open` for code outside asyncio."""
        return _sync("open", lambda: cls.open(url, durability=durability))

    async def claim(
        self,
        scope: str,
        candidates: Iterable[Union[str, Candidate, Mapping[str, Any]]],
        *,
        limit: int,
        lease_seconds: float = 3600,
        run_id: Optional[str] = None,
        routine_id: Optional[str] = None,
    ) -> ClaimResult:
        """Labels every candidate granted or skipped, granting at most ``limit``, in one atomic step."""
        request = {
            "scope": scope,
            "candidates": [_candidate(c) for c in _options.items(
                "candidates", candidates, lambda c: isinstance(c, (str, Candidate)), _checked(str, Candidate, Mapping),
                "a list of subject keys, Candidates or mappings (or one)", "a candidate")],
            "limit": limit,
            "lease_ms": int(lease_seconds * 1000),
            "run_id": run_id,
            "routine_id": routine_id,
        }
        raw = json.loads(await self._native.claim(json.dumps(request)))
        labelled = []
        for c in raw["candidates"]:
            granted = c["status"] == "granted"
            labelled.append(
                Labelled(
                    subject_key=c["subject_key"],
                    granted=granted,
                    grant_reason=_enum(GrantReason, c.get("grant_reason")),
                    token=c.get("token"),
                    lease_until=c.get("lease_until"),
                    skip_reason=_enum(SkipReason, c.get("skip_reason")),
                    eligible_at=c.get("eligible_at"),
                )
            )
        return ClaimResult(scope=raw["scope"], candidates=labelled)

    def claim_sync(
        self,
        scope: str,
        candidates: Iterable[Union[str, Candidate, Mapping[str, Any]]],
        *,
        limit: int,
        lease_seconds: float = 3600,
        run_id: Optional[str] = None,
        routine_id: Optional[str] = None,
    ) -> ClaimResult:
        """:meth:`claim` for code outside asyncio."""
        return _sync("claim", lambda: self.claim(scope, candidates, limit=limit, lease_seconds=lease_seconds,
                                                 run_id=run_id, routine_id=routine_id))

    async def record(self, scope: str, records: Iterable[Mapping[str, Any]], *, run_id: Optional[str] = None) -> RecordResult:
        """Records outcomes (``subject_key``, ``outcome``, optionally ``token``, ``fingerprint``): the whole
        batch or nothing."""
        raw = json.loads(await self._native.record(scope, json.dumps([_record(r) for r in _options.items(
            "records", records, lambda r: isinstance(r, Mapping), _checked(Mapping), "a list of records (or one)",
            "a record")]), run_id))
        recorded = [Recorded(**{**r, "outcome": Outcome(r["outcome"])}) for r in raw["recorded"]]
        return RecordResult(scope=raw["scope"], recorded=recorded, escalate=raw["escalate"])

    def record_sync(self, scope: str, records: Iterable[Mapping[str, Any]], *,
                    run_id: Optional[str] = None) -> RecordResult:
        """:meth:`record` for code outside asyncio."""
        return _sync("record", lambda: self.record(scope, records, run_id=run_id))

    async def list(self, scope: Optional[str] = None, *, state: str = "all", routine_id: Optional[str] = None) -> list[LedgerEntry]:
        """Ledger rows, soonest eligible first; ``state`` is all, eligible or suppressed."""
        query = {"scope": scope, "state": state, "routine_id": routine_id}
        rows = json.loads(await self._native.list(json.dumps(query)))
        return [
            LedgerEntry(
                **{
                    **r,
                    "state": EntryState(r["state"]),
                    "last_outcome": _enum(AttemptOutcome, r["last_outcome"]),
                    "last_grant_reason": _enum(GrantReason, r["last_grant_reason"]),
                }
            )
            for r in rows
        ]

    def list_sync(self, scope: Optional[str] = None, *, state: str = "all",
                  routine_id: Optional[str] = None) -> "builtins.list[LedgerEntry]":
        """:meth:`list` for code outside asyncio."""
        return _sync("list", lambda: self.list(scope, state=state, routine_id=routine_id))

    async def grant_reason_counts(self, scope: str) -> GrantReasonCounts:
        return GrantReasonCounts(**json.loads(await self._native.grant_reason_counts(scope)))

    def grant_reason_counts_sync(self, scope: str) -> GrantReasonCounts:
        """:meth:`grant_reason_counts` for code outside asyncio."""
        return _sync("grant_reason_counts", lambda: self.grant_reason_counts(scope))

    async def report_backlog(
        self,
        routine_id: str,
        subject_keys: Iterable[str],
        batch_size: int,
        *,
        limits: Union[RoutineLimits, Mapping[str, Any]] = RoutineLimits(),
        run_id: Optional[str] = None,
    ) -> BacklogReport:
        """Counts how many of ``subject_keys`` are workable now in the routine's scope, and answers
        ``ceil(workable / batch_size)`` extra runs capped by the routine's limits; the report is kept for
        :meth:`drain_decision`. A bad argument (a batch size below 1, an empty key, an unknown limit)
        raises :class:`InvalidLedgerArgument` naming it."""
        raw = await self._native.report_backlog(routine_id, _options.strings("subject_keys", subject_keys), batch_size,
                                                _limits_json(limits), run_id)
        return BacklogReport(**json.loads(raw))

    def report_backlog_sync(
        self,
        routine_id: str,
        subject_keys: Iterable[str],
        batch_size: int,
        *,
        limits: Union[RoutineLimits, Mapping[str, Any]] = RoutineLimits(),
        run_id: Optional[str] = None,
    ) -> BacklogReport:
        """:meth:`report_backlog` for code outside asyncio."""
        return _sync("report_backlog", lambda: self.report_backlog(routine_id, subject_keys, batch_size, limits=limits,
                                                                   run_id=run_id))

    async def drain_decision(self, routine_id: str, run_id: str, *,
                             limits: Union[RoutineLimits, Mapping[str, Any]] = RoutineLimits()) -> DrainDecision:
        """After run ``run_id`` of a draining routine finishes: ``stop`` (``queue_empty``,
        ``run_did_not_report``, ``nothing_workable``, ``report_stale``) or ``start_runs`` for the host to
        start."""
        return DrainDecision(**json.loads(await self._native.drain_decision(routine_id, run_id, _limits_json(limits))))

    def drain_decision_sync(self, routine_id: str, run_id: str, *,
                            limits: Union[RoutineLimits, Mapping[str, Any]] = RoutineLimits()) -> DrainDecision:
        """:meth:`drain_decision` for code outside asyncio."""
        return _sync("drain_decision", lambda: self.drain_decision(routine_id, run_id, limits=limits))

    def for_routine(
        self,
        scope: str,
        *,
        run_id: str,
        routine_id: Optional[str] = None,
        limit: int = 5,
        lease_seconds: float = 3600,
        limits: RoutineLimits = RoutineLimits(),
    ) -> RoutineLedger:
        """The four agent tools bound to one run of a routine, for ``ambit.Agent(ledger=...)``. ``limit``
        is the most one ``claim_work`` grants; ``limits`` are the routine's, for ``report_backlog``
        (which needs ``routine_id``)."""
        native = self._native.tools_for_routine(
            scope, run_id, limit, int(lease_seconds * 1000), _limits_json(limits), routine_id)
        return RoutineLedger(native, scope, routine_id, run_id)
