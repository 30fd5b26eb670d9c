"""Permissions: the policy a session runs under, approvals, and the tool listing."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from os import PathLike
from typing import Any, Awaitable, Callable, Literal, Mapping, Sequence, Union

from ._options import mapping, paths, strings
from .errors import ConfigError

__all__ = ["Approve", "ApprovalRequest", "Deny", "Later", "Policy", "Revise", "ToolListing", "Level", "Network"]

Level = Literal["none", "read", "workspace", "unrestricted"]
Network = Literal["none", "remote", "unrestricted"]


@dataclass(frozen=True)
class ApprovalRequest:
    """A call put to a person: above the session's level, or of a tool that requires approval."""

    call_id: str
    tool: str
    arguments: Any
    tool_level: Level
    session_level: Level
    reason: Literal["above_level", "requires_approval"]


@dataclass(frozen=True)
class Approve:
    """Run the call as asked (at the session's level: approval never widens reach)."""


@dataclass(frozen=True)
class Deny:
    """Refuse the call; the model sees ``reason``."""

    reason: str


@dataclass(frozen=True)
class Revise:
    """Run the call with these arguments instead (they pass the argument rule again)."""

    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class Later:
    """Not now: in a session run (``Sessions.run``) the run parks in ``awaiting_approval`` until
    ``Sessions.resume`` brings the answer, from any process and language; outside a session the call
    is refused."""


Decision = Union[Approve, Deny, Revise, Later]
ApprovalHandler = Callable[[ApprovalRequest], Union[Decision, Awaitable[Decision]]]


def _decision_json(answer: Any) -> str:
    if isinstance(answer, Approve) or answer is True:
        return '{"decision": "approve"}'
    if isinstance(answer, Deny):
        return json.dumps({"decision": "deny", "reason": answer.reason})
    if isinstance(answer, Revise):
        return json.dumps({"decision": "revise", "arguments": dict(answer.arguments)})
    if isinstance(answer, Later):
        return '{"decision": "later"}'
    raise TypeError(f"an approval handler returns Approve(), Deny(reason) or Revise(arguments), not {answer!r}")


@dataclass(frozen=True)
class Policy:
    """What a session may do. Without a policy an agent runs at ``unrestricted`` with approvals off;
    setting a level is what turns the checks on.

    ``approvals`` is a plain or async function ``(ApprovalRequest) -> Approve() | Deny(reason) |
    Revise(arguments)``; with it, calls above the level are put to it instead of refused, and so is
    every call of a tool marked ``requires_approval``. An exception it raises denies the call."""

    level: Level = "unrestricted"
    approvals: ApprovalHandler | None = None
    allow_tools: Sequence[str] | None = None
    block_tools: Sequence[str] = ()
    level_overrides: Mapping[str, Level] = field(default_factory=dict)
    working_directory: str | PathLike[str] | None = None
    workspace_directories: Sequence[str | PathLike[str]] = ()
    readable_directories: Sequence[str | PathLike[str]] = ()
    confine_reads: bool = False
    network: Network = "unrestricted"
    #: Addresses or CIDR ranges of this machine or link-local (169.254.0.0/16, fe80::/10: cloud metadata
    #: services) that ``web_fetch`` may still reach under ``network="remote"``.
    allow_local_addresses: Sequence[str] = ()

    def __post_init__(self) -> None:
        # Read as the core reads a tool's arguments: one string is a one-entry list; a wrong type is
        # refused here, naming the option, before it could be taken apart or ignored.
        put = object.__setattr__
        for name in ("level", "network"):
            if not isinstance(getattr(self, name), str):
                raise ConfigError(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.allow_tools is not None:
            put(self, "allow_tools", tuple(strings("allow_tools", self.allow_tools)))
        put(self, "block_tools", tuple(strings("block_tools", self.block_tools)))
        put(self, "allow_local_addresses", tuple(strings("allow_local_addresses", self.allow_local_addresses)))
        put(self, "level_overrides",
            mapping("level_overrides", self.level_overrides, lambda v: isinstance(v, str), "levels"))
        put(self, "workspace_directories", tuple(paths("workspace_directories", self.workspace_directories)))
        put(self, "readable_directories", tuple(paths("readable_directories", self.readable_directories)))
        if self.working_directory is not None:
            put(self, "working_directory", paths("working_directory", [self.working_directory])[0])
        if not isinstance(self.confine_reads, bool):
            raise ConfigError(f"confine_reads must be True or False, got {self.confine_reads!r}")

    def _config_json(self) -> str:
        import os
        config: dict[str, Any] = {
            "level": self.level,
            "block_tools": list(self.block_tools),
            "level_overrides": dict(self.level_overrides),
            "workspace_directories": [os.fspath(p) for p in self.workspace_directories],
            "readable_directories": [os.fspath(p) for p in self.readable_directories],
            "confine_reads": self.confine_reads,
            "network": self.network,
            "allow_local_addresses": list(self.allow_local_addresses),
        }
        if self.allow_tools is not None:
            config["allow_tools"] = list(self.allow_tools)
        if self.working_directory is not None:
            config["working_directory"] = os.fspath(self.working_directory)
        return json.dumps(config)

    def _native_approvals(self) -> tuple[Callable[[str], Any], bool] | None:
        handler = self.approvals
        if handler is None:
            return None
        if not callable(handler):
            raise TypeError(f"approvals must be a function, got {handler!r}")
        if inspect.iscoroutinefunction(handler):
            async def decide(request: str) -> str:
                return _decision_json(await handler(ApprovalRequest(**json.loads(request))))
            return decide, True

        def decide_sync(request: str) -> str:
            return _decision_json(handler(ApprovalRequest(**json.loads(request))))
        return decide_sync, False


@dataclass(frozen=True)
class ToolListing:
    """One tool as the policy sees it: its effective level and whether it is offered to the model."""

    name: str
    level: Level
    declared_level: Level
    status: Literal["offered", "blocked", "above_level", "deferred", "hidden", "no_network"]
    approval: bool
    #: What confines the tool's calls on this machine (the shell: the kernel's sandbox layers), else None.
    confinement: str | None = None
