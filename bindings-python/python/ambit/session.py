"""Sessions (SPEC §8): an append-only conversation log in SQLite (default) or PostgreSQL. A run in a
session continues its live window and appends what it adds; compaction appends a boundary and a summary
the model writes, and never deletes, so ``search`` and ``read`` still reach every turn.

    sessions = await ambit.Sessions.open("sqlite:///var/lib/app/sessions.db")
    sid = await sessions.create()
    result = await sessions.run(agent, sid, "Remember: the deploy key is in vault/ops.")

Give the agent the session tools with ``builtins=ambit.SESSION_TOOLS``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from . import _native

if TYPE_CHECKING:
    from . import Agent, RunResult
    from .policy import ApprovalRequest, Decision

__all__ = ["Sessions", "SESSION_TOOLS"]

#: The session tools, by built-in name.
SESSION_TOOLS = ("conversation_search", "conversation_read", "context_check", "context_compact")


class Sessions:
    """An open session store. Make one with :meth:`Sessions.open`."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @classmethod
    async def open(cls, url: str, *, context_window: int | None = None, compact_at: float = 0.85,
                   keep_recent: int = 2) -> "Sessions":
        """Opens ``sqlite:///path`` (created if missing) or ``postgres://…``, applying the migrations.
        Auto-compaction fires when a run would start past ``compact_at`` of the context window: the
        model's (its ``context_window`` setting, else its family's default) unless ``context_window``
        names one for this store; a compaction keeps the latest ``keep_recent`` rounds verbatim.

        One run at a time per session, across processes: a second raises :class:`SessionBusy`; a
        resume is exactly once: one that finds no approval waiting raises :class:`SessionNotParked`."""
        config = {"context_window": context_window, "compact_at": compact_at, "keep_recent": keep_recent}
        return cls(await _native.NativeSessions.open(url, json.dumps(config)))

    async def create(self) -> str:
        """A new, empty session; its id."""
        return await self._native.create()

    async def run(self, agent: "Agent", session_id: str, input: str) -> "RunResult":
        """Runs ``agent`` on ``input`` in the session, continuing its conversation."""
        from . import _result
        return _result(json.loads(await self._native.run(agent._native, session_id, input)), agent._decode_output)

    async def compact(self, agent: "Agent", session_id: str) -> bool:
        """Compacts now (the agent's model writes the summary); False when there was nothing to summarise."""
        return await self._native.compact(agent._native, session_id)

    async def search(self, session_id: str, query: str, *, is_regex: bool = False, limit: int = 20) -> str:
        """``conversation_search``: matching lines tagged ``#N role:``."""
        return await self._native.search(session_id, query, is_regex, limit)

    async def read(self, session_id: str, start: int, limit: int = 1) -> str:
        """``conversation_read``: up to 20 entries from ``#start``."""
        return await self._native.read(session_id, start, limit)

    async def resume(self, agent: "Agent", session_id: str, decision: "Decision") -> "RunResult":
        """Answers the approval a parked session waits on and continues the run as if the answer had come
        live. Raises :class:`AwaitingApproval` when another call of the same turn still waits."""
        from . import _result
        from .policy import _decision_json
        return _result(json.loads(await self._native.resume(agent._native, session_id, _decision_json(decision))),
                       agent._decode_output)

    async def pending(self, session_id: str) -> "ApprovalRequest | None":
        """The approval a parked session waits on, or None."""
        from .policy import ApprovalRequest
        raw = json.loads(await self._native.pending(session_id))
        return None if raw is None else ApprovalRequest(**raw)

    async def entries(self, session_id: str) -> list[dict[str, Any]]:
        """The whole log: ``{"index", "kind", ...}`` per entry, boundaries and summaries included."""
        return json.loads(await self._native.entries(session_id))
