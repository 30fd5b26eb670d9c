"""Sessions (SPEC §8): an append-only conversation log in SQLite (default) or PostgreSQL. A run in a
session continues its live window and appends what it adds; compaction appends a boundary and a summary
the model writes, and never deletes, so ``search`` and ``read`` still reach every turn.

    sessions = await ambit.Sessions.open("sqlite:///var/lib/app/sessions.db")
    sid = await sessions.create()
    result = await sessions.run(agent, sid, "Remember: the deploy key is in vault/ops.")

Give the agent the session tools with ``builtins=ambit.SESSION_TOOLS``. Every ``async`` method has a
``*_sync`` twin for code outside asyncio (``Sessions.open_sync``, ``sessions.run_sync``, ...)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _native
from ._aio import sync as _sync

#: "No context given" (``None`` is a context like any other).
_NO_CONTEXT: Any = object()


def _context_key(context: Any) -> int:
    """The facade's id for a run's context (0: none), as ``Agent.run`` keeps it."""
    from . import _NO_CONTEXT as none, _enter_context
    return _enter_context(none if context is _NO_CONTEXT else context)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from . import Agent, RunResult
    from .content import Part
    from .policy import ApprovalRequest, Decision

__all__ = ["Sessions", "SESSION_TOOLS", "Delivery", "Deliveries", "TaskSnapshot"]

#: The session tools, by built-in name.
SESSION_TOOLS = ("conversation_search", "conversation_read", "session_list", "session_search", "context_check",
                 "context_compact")


def _json_number(value: Any) -> Any:
    """``value`` as JSON can carry it: JSON has no NaN or infinity, so those travel as their names,
    which the core refuses naming the setting (``json.dumps`` would write a token no parser reads)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


@dataclass(frozen=True)
class Delivery:
    """A background task's result that landed in a session after the run that started it ended. Its
    result is now the session's last turn: continue the session with :meth:`Sessions.run`."""

    session_id: str
    task_id: str
    #: The tool the task ran.
    name: str
    #: ``finished``, ``failed`` or ``cancelled``.
    status: str
    result: str


@dataclass(frozen=True)
class TaskSnapshot:
    """A session's background task as the store has it (:meth:`Sessions.task_result`)."""

    session_id: str
    task_id: str
    #: The tool the task runs.
    name: str
    #: ``running``, ``finished``, ``failed``, ``cancelled``, or ``lost`` (its process died).
    status: str
    #: The latest progress note.
    note: str | None
    #: The result text, once it landed.
    result: str | None


class Deliveries:
    """The results that land in a store's sessions from the moment :meth:`Sessions.deliveries` was
    called, as an async iterator::

        async for d in sessions.deliveries():
            await sessions.run(agent, d.session_id, "The report is in.")
    """

    def __init__(self, native: Any) -> None:
        self._native = native

    def __aiter__(self) -> "Deliveries":
        return self

    async def __anext__(self) -> Delivery:
        raw = json.loads(await self._native.next())
        if raw is None:
            raise StopAsyncIteration
        return Delivery(**raw)


class Sessions:
    """An open session store. Make one with :meth:`Sessions.open`."""

    def __init__(self, native: _native.NativeSessions) -> None:
        self._native = native

    @classmethod
    async def open(cls, url: str, *, context_window: int | None = None, compact_at: float = 0.85,
                   keep_recent: int = 2, lease_ms: int | None = None,
                   busy_wait_ms: int | None = None) -> "Sessions":
        """Opens ``sqlite:///path`` (created if missing) or ``postgres://…``, applying the migrations.
        Auto-compaction fires when a run would start past ``compact_at`` of the context window: the
        model's (its ``context_window`` setting, else its family's default) unless ``context_window``
        names one for this store; a compaction keeps the latest ``keep_recent`` rounds verbatim.

        One run at a time per session, across processes: a second raises :class:`SessionBusy`; a
        resume is exactly once: one that finds no approval waiting raises :class:`SessionNotParked`.
        ``busy_wait_ms`` makes a run on a busy session wait up to that long for it instead (at most one
        hour). ``lease_ms`` is how long a run holds the session unless its heartbeat renews it (default
        30 000; also how long a background task's process may stay silent before the task is ``lost``)."""
        config = {"context_window": context_window, "compact_at": compact_at, "keep_recent": keep_recent,
                  "lease_ms": _json_number(lease_ms), "busy_wait_ms": _json_number(busy_wait_ms)}
        return cls(await _native.NativeSessions.open(url, json.dumps(config)))

    @classmethod
    def open_sync(cls, url: str, *, context_window: int | None = None, compact_at: float = 0.85,
                  keep_recent: int = 2, lease_ms: int | None = None,
                  busy_wait_ms: int | None = None) -> "Sessions":
        """:meth:`open` for code outside asyncio."""
        return _sync("open", lambda: cls.open(url, context_window=context_window, compact_at=compact_at,
                                              keep_recent=keep_recent, lease_ms=lease_ms, busy_wait_ms=busy_wait_ms))

    async def create(self) -> str:
        """A new, empty session; its id."""
        return await self._native.create()

    def create_sync(self) -> str:
        """:meth:`create` for code outside asyncio."""
        return _sync("create", self.create)

    async def run(self, agent: "Agent", session_id: str, input: "str | Sequence[Part | str]", *,
                  context: Any = _NO_CONTEXT) -> "RunResult":
        """Runs ``agent`` on ``input`` in the session, continuing its conversation.

        The session is the history: ``input`` is the next user message, a string or a list of parts
        (:class:`ambit.Text`, :class:`ambit.Image`, :class:`ambit.File`, strings as text), as
        ``agent.run`` takes them. The parts are stored in the session, so later turns (and a resume in
        another process) send the image again; a part the core refuses raises
        :class:`InvalidMessage` naming it, and nothing is stored. A list of messages is refused with
        :class:`ConfigError` and nothing is stored; to keep a history yourself, run the agent without a
        session (``agent.run(messages)``). ``context`` is a value of yours every tool, hook and
        guardrail of the run reads as ``ctx.context``, as in ``agent.run(..., context=...)``: never sent to
        the model, never stored (a parked run's resume is given it again)."""
        from . import _result, _leave_context
        from .content import is_part, part_to_dict
        messages: str | None = None
        if isinstance(input, (list, tuple)) and input and all(is_part(p) or isinstance(p, str) for p in input) \
                and any(is_part(p) for p in input):
            messages = json.dumps([{"role": "user", "content": [part_to_dict(p) for p in input]}])
            input = ""
        elif not isinstance(input, str):
            from .errors import ConfigError
            raise ConfigError(f"a session keeps its own history: Sessions.run takes the next user message (a string "
                              f"or a list of parts), not {type(input).__name__}; to pass a history of your own, run "
                              f"the agent without a session (agent.run(messages))")
        key = _context_key(context)
        try:
            raw = await self._native.run(agent._native, session_id, input, key, messages)
        finally:
            _leave_context(key)
        return _result(json.loads(raw), agent._decode_output)

    def run_sync(self, agent: "Agent", session_id: str, input: "str | Sequence[Part | str]", *,
                 context: Any = _NO_CONTEXT) -> "RunResult":
        """:meth:`run` for code outside asyncio."""
        return _sync("run", lambda: self.run(agent, session_id, input, context=context))

    async def compact(self, agent: "Agent", session_id: str) -> bool:
        """Compacts now (the agent's model writes the summary); False when there was nothing to summarise."""
        return await self._native.compact(agent._native, session_id)

    def compact_sync(self, agent: "Agent", session_id: str) -> bool:
        """:meth:`compact` for code outside asyncio."""
        return _sync("compact", lambda: self.compact(agent, session_id))

    async def search(self, session_id: str, query: str, *, is_regex: bool = False, limit: int = 20) -> str:
        """``conversation_search``: matching lines tagged ``#N role:``."""
        return await self._native.search(session_id, query, is_regex, limit)

    def search_sync(self, session_id: str, query: str, *, is_regex: bool = False, limit: int = 20) -> str:
        """:meth:`search` for code outside asyncio."""
        return _sync("search", lambda: self.search(session_id, query, is_regex=is_regex, limit=limit))

    async def read(self, session_id: str, start: int, limit: int = 1) -> str:
        """``conversation_read``: up to 20 entries from ``#start``."""
        return await self._native.read(session_id, start, limit)

    def read_sync(self, session_id: str, start: int, limit: int = 1) -> str:
        """:meth:`read` for code outside asyncio."""
        return _sync("read", lambda: self.read(session_id, start, limit))

    async def resume(self, agent: "Agent", session_id: str, decision: "Decision", *,
                     context: Any = _NO_CONTEXT) -> "RunResult":
        """Answers the approval a parked session waits on and continues the run as if the answer had come
        live (``context`` as in :meth:`run`: a parked run's context is not stored, so give it again).
        Raises :class:`AwaitingApproval` when another call of the same turn still waits."""
        from . import _result, _leave_context
        from .policy import _decision_json
        key = _context_key(context)
        try:
            raw = await self._native.resume(agent._native, session_id, _decision_json(decision), key)
        finally:
            _leave_context(key)
        return _result(json.loads(raw), agent._decode_output)

    def resume_sync(self, agent: "Agent", session_id: str, decision: "Decision", *,
                    context: Any = _NO_CONTEXT) -> "RunResult":
        """:meth:`resume` for code outside asyncio."""
        return _sync("resume", lambda: self.resume(agent, session_id, decision, context=context))

    async def pending(self, session_id: str) -> "ApprovalRequest | None":
        """The approval a parked session waits on, or None."""
        from .policy import ApprovalRequest
        raw = json.loads(await self._native.pending(session_id))
        return None if raw is None else ApprovalRequest(**raw)

    def pending_sync(self, session_id: str) -> "ApprovalRequest | None":
        """:meth:`pending` for code outside asyncio."""
        return _sync("pending", lambda: self.pending(session_id))

    def deliveries(self) -> Deliveries:
        """Work that outlives the run (SPEC §8b): a run in a session ends without waiting for its
        background tasks; each result lands in the session as its own turn when it comes, and is
        announced here (as this process runs the task)."""
        return Deliveries(self._native.deliveries())

    async def task_result(self, session_id: str, task_id: str) -> TaskSnapshot:
        """A session's background task from any process: its status, latest progress note and result. A
        task whose process died is ``lost``. An unknown id raises :class:`AmbitError` (code
        ``invalid_argument``) naming it."""
        return TaskSnapshot(**json.loads(await self._native.task_result(session_id, task_id)))

    def task_result_sync(self, session_id: str, task_id: str) -> TaskSnapshot:
        """:meth:`task_result` for code outside asyncio."""
        return _sync("task_result", lambda: self.task_result(session_id, task_id))

    async def entries(self, session_id: str) -> list[dict[str, Any]]:
        """The whole log: ``{"index", "kind", ...}`` per entry, boundaries and summaries included."""
        entries: list[dict[str, Any]] = json.loads(await self._native.entries(session_id))
        return entries

    def entries_sync(self, session_id: str) -> list[dict[str, Any]]:
        """:meth:`entries` for code outside asyncio."""
        return _sync("entries", lambda: self.entries(session_id))
