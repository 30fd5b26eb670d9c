"""Sub-agent settings (SPEC §7). The rules — narrowing, depth, the five agent tools — live in the core,
which refuses a bad value by name; this only carries the settings across."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from . import Agent

__all__ = ["NamedAgent", "Subagents"]


@dataclass(frozen=True)
class Subagents:
    """Gives an agent ``agent_spawn``, ``agent_list``, ``agent_followup``, ``agent_steer`` and
    ``agent_delete``. A sub-agent is never wider than its parent (level, directories, network, tools);
    a wider request is refused by name.

    ``max_depth``: levels of sub-agents below the agent (default 3; 1: sub-agents cannot spawn; 0: no
    agent tools). ``memory``: whether the agent holds a memory store it may grant read access to."""

    max_depth: int = 3
    memory: Literal["none", "read"] = "none"

    def _config(self) -> dict[str, Any]:
        return {"max_depth": self.max_depth, "memory": self.memory}


def subagents_config(value: Subagents | bool | None) -> dict[str, Any] | None:
    """The core's ``AgentOptions.subagents`` for the ``subagents=`` argument of :class:`ambit.Agent`."""
    if value is None or value is False:
        return None
    if value is True:
        return {}
    if not isinstance(value, Subagents):
        raise TypeError(f"subagents must be an ambit.Subagents or a bool, got {type(value).__name__}")
    return value._config()


@dataclass(frozen=True)
class NamedAgent:
    """An agent another agent may hand work to by name: ``Agent(..., agents={"researcher":
    NamedAgent(researcher, description="Looks up facts; one question per task.")})``.

    The caller gets ``agent_list_named`` (each name with its ``description``: say when and how to use
    the agent) and ``agent_delegate {agent, prompt}``. The named agent runs with its own instructions,
    tools and model, inside the caller's reach (level, directories and network are what both hold), and
    its report comes back headed by its name and that reach. With ``background=True`` on the caller,
    ``background: true`` makes a delegation a background task."""

    agent: Agent
    description: str
