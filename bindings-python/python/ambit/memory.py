"""Memory: what an agent keeps between sessions (SPEC §14).

    memory = await ambit.Memory.open("sqlite:///var/lib/app/memory.db")   # or postgres://...
    saved = await memory.remember("support-bot", "Refunds over 500 EUR need a second approver.",
                                  title="Refund limit", kind="instruction", tags=["billing"], salience=8)
    hits = await memory.recall("support-bot", "who approves a large refund")
    agent = ambit.Agent(model=model, memory=memory, agent_name="support-bot")   # memory_* tools

Every rule lives in the Rust core; this module turns its JSON into dataclasses, and its errors into
exceptions with the same ``code`` as every other language. Times are milliseconds since the Unix epoch.
"""

from __future__ import annotations

import builtins
import json
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping, Optional

from . import _native, _options
from ._aio import sync as _sync
from .errors import AmbitError

__all__ = [
    "Memory", "MemoryRecord", "Saved", "AgentMemoryError", "InvalidMemoryArgument", "MemoryNotFound",
    "MemoryReadOnly", "MemoryStoreError", "Kind",
]

Kind = Literal["fact", "preference", "lesson", "instruction"]


class AgentMemoryError(AmbitError):
    """A memory call refused or failed. (Not Python's built-in ``MemoryError``.)"""

    code = "memory_store"


class InvalidMemoryArgument(AgentMemoryError, ValueError):
    """An argument out of bounds or malformed; ``field`` names it and the message gives the limit."""

    code = "memory_invalid_argument"
    field: str = ""


class MemoryNotFound(AgentMemoryError, KeyError):
    """No memory with that id or key for this agent."""

    code = "memory_not_found"

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class MemoryReadOnly(AgentMemoryError):
    """A write through read-only access (a sub-agent's grant)."""

    code = "memory_read_only"


class MemoryStoreError(AgentMemoryError):
    """The store failed: unreachable, I/O, a migration that does not apply."""

    code = "memory_store"


_BY_CODE: dict[str, type[AgentMemoryError]] = {
    c.code: c for c in (InvalidMemoryArgument, MemoryNotFound, MemoryReadOnly, MemoryStoreError)
}


def _from_core(code: str, message: str, details: Mapping[str, Any]) -> AgentMemoryError:
    """Called by the native module to turn a memory error into its exception."""
    exc = _BY_CODE.get(code, AgentMemoryError)(message, code=code)
    for key, value in details.items():
        setattr(exc, key, value)
    return exc


@dataclass(frozen=True)
class MemoryRecord:
    """One stored memory. ``salience`` runs from 1 (trivia) to 10 (essential)."""

    id: int
    agent: str
    kind: Kind
    title: str
    body: str
    tags: list[str]
    salience: int
    pinned: bool
    created_at: int
    updated_at: int
    key: Optional[str] = None
    subject: Optional[str] = None
    source: Optional[str] = None


@dataclass(frozen=True)
class Saved:
    """What a remember did: the memory, and ``created`` (``False`` when a key updated one in place)."""

    memory: MemoryRecord
    created: bool


def _record(d: Mapping[str, Any]) -> MemoryRecord:
    return MemoryRecord(**d)


def _invalid(name: str, message: str) -> InvalidMemoryArgument:
    exc = InvalidMemoryArgument(f"invalid memory argument '{name}': {message}", code="memory_invalid_argument")
    exc.field = name
    return exc


def _optional_str(name: str, value: Any) -> Optional[str]:
    """A string argument as the core can take it: a Python ``str`` may hold a lone surrogate, which is no
    Unicode text; it is refused naming the argument instead of failing as a whole memory or as an
    ``UnicodeEncodeError``."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(name, f"must be a string, got {type(value).__name__}")
    at = _options.lone_surrogate(value)
    if at is not None:
        raise _invalid(name, f"is not valid Unicode text (a lone surrogate at index {at})")
    return value


def _agent(agent: Any) -> str:
    out = _optional_str("agent", agent)
    if out is None:
        raise _invalid("agent", "must be a string, got None")
    return out


def _strings(name: str, value: Any) -> list[str]:
    return [_optional_str(name, v) or "" for v in _options.strings(name, value)]


def _int64(name: str, value: Any) -> Optional[int]:
    """An integer argument as the core takes it: within 64 bits, else refused naming it."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _invalid(name, f"must be an integer, got {type(value).__name__}")
    if not -(2 ** 63) <= value < 2 ** 63:
        raise _invalid(name, f"{value} is not an integer within the 64-bit range")
    return value


class Memory:
    """A memory store on SQLite (``sqlite:///path``) or PostgreSQL (``postgres://…``), one namespace per
    agent name."""

    def __init__(self, native: _native.NativeMemory, url: str) -> None:
        self._native = native
        self.url = url

    @classmethod
    async def open(cls, url: str) -> "Memory":
        """Opens the store, applying its migrations."""
        return cls(await _native.NativeMemory.open(url), url)

    @classmethod
    def open_sync(cls, url: str) -> "Memory":
        """:meth:`open` for code outside asyncio."""
        return _sync("open", lambda: cls.open(url))

    async def remember(self, agent: str, body: Optional[str] = None, *, title: Optional[str] = None,
                       kind: Optional[Kind] = None, tags: Iterable[str] | str | None = None,
                       salience: Optional[int] = None, pinned: Optional[bool] = None, key: Optional[str] = None,
                       subject: Optional[str] = None) -> Saved:
        """Saves a memory in ``agent``'s namespace; with a ``key`` already saved, updates that memory in
        place (arguments left ``None`` keep their values)."""
        memory: dict[str, Any] = {}
        for name, value in (("body", body), ("title", title), ("kind", kind), ("key", key), ("subject", subject)):
            if _optional_str(name, value) is not None:
                memory[name] = value
        if tags is not None:
            memory["tags"] = _strings("tags", tags)
        if salience is not None:
            memory["salience"] = _int64("salience", salience)
        if pinned is not None:
            memory["pinned"] = pinned
        saved = json.loads(await self._native.remember(_agent(agent), json.dumps(memory)))
        return Saved(memory=_record(saved["memory"]), created=saved["created"])

    def remember_sync(self, agent: str, body: Optional[str] = None, *, title: Optional[str] = None,
                      kind: Optional[Kind] = None, tags: Iterable[str] | str | None = None,
                      salience: Optional[int] = None, pinned: Optional[bool] = None, key: Optional[str] = None,
                      subject: Optional[str] = None) -> Saved:
        """:meth:`remember` for code outside asyncio."""
        return _sync("remember", lambda: self.remember(agent, body, title=title, kind=kind, tags=tags,
                                                       salience=salience, pinned=pinned, key=key, subject=subject))

    async def recall(self, agent: str, query: Optional[str] = None, *, tags: Iterable[str] | str = (),
                     kind: Optional[Kind] = None, subjects: Iterable[str] | str = (), limit: int = 10) -> list[MemoryRecord]:
        """With a query, ranked by relevance over title, body and tags; without one, pinned and highest
        salience first. ``tags`` keeps memories carrying all of them; at most ``limit`` (1 to 50)."""
        recall: dict[str, Any] = {"tags": _strings("tags", tags), "subjects": _strings("subjects", subjects),
                                  "limit": _int64("limit", limit)}
        if _optional_str("query", query) is not None:
            recall["query"] = query
        if kind is not None:
            recall["kind"] = kind
        return [_record(m) for m in json.loads(await self._native.recall(_agent(agent), json.dumps(recall)))]

    def recall_sync(self, agent: str, query: Optional[str] = None, *, tags: Iterable[str] | str = (),
                    kind: Optional[Kind] = None, subjects: Iterable[str] | str = (),
                    limit: int = 10) -> "builtins.list[MemoryRecord]":
        """:meth:`recall` for code outside asyncio."""
        return _sync("recall", lambda: self.recall(agent, query, tags=tags, kind=kind, subjects=subjects, limit=limit))

    async def forget(self, agent: str, *, id: Optional[int] = None, key: Optional[str] = None) -> bool:
        """Forgets one memory by ``id`` or ``key``; whether it existed."""
        return await self._native.forget(_agent(agent), id=_int64("id", id), key=_optional_str("key", key))

    def forget_sync(self, agent: str, *, id: Optional[int] = None, key: Optional[str] = None) -> bool:
        """:meth:`forget` for code outside asyncio."""
        return _sync("forget", lambda: self.forget(agent, id=id, key=key))

    async def list(self, agent: str) -> list[MemoryRecord]:
        """Every memory of ``agent``, oldest first."""
        return [_record(m) for m in json.loads(await self._native.list(_agent(agent)))]

    def list_sync(self, agent: str) -> "builtins.list[MemoryRecord]":
        """:meth:`list` for code outside asyncio."""
        return _sync("list", lambda: self.list(agent))

    async def export(self, agent: Optional[str] = None) -> str:
        """The memories of ``agent`` (or of every agent) as JSON: ``{"version": 1, "memories": [...]}``."""
        return await self._native.export(None if agent is None else _agent(agent))

    def export_sync(self, agent: Optional[str] = None) -> str:
        """:meth:`export` for code outside asyncio."""
        return _sync("export", lambda: self.export(agent))
