"""Skills (SPEC §14): folders in the Agent Skills format (``<dir>/<name>/SKILL.md`` with YAML front matter
``name``, ``description`` and optionally ``priority``), the format Claude Code reads and writes.

``Agent(..., skills=Skills(["~/.claude/skills"]))`` lists the installed skills in a bounded index on
every request and gives the agent ``skill_read`` and ``skill_search``; ``agent_managed=True`` adds
``skill_write``, ``skill_edit`` and ``skill_delete`` (never given to a sub-agent). Every file is reached
through the agent's policy scope, like the file tools."""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from typing import Any, Sequence, Union, cast

from ._options import paths
from .errors import ConfigError

__all__ = ["Skills"]


@dataclass(frozen=True)
class Skills:
    """An agent's skills directories. ``dirs``: absolute, or relative to the policy's working directory;
    a new skill is written to the first. ``agent_managed``: the three writing tools. ``index_entries``:
    the most skills the per-turn index lists (default 100, at most 1,000; 0: no index)."""

    dirs: Union[str, "PathLike[str]", Sequence[Union[str, "PathLike[str]"]]]
    agent_managed: bool = False
    index_entries: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "dirs", tuple(paths("skills.dirs", self.dirs)))
        if not isinstance(self.agent_managed, bool):
            raise ConfigError(f"skills.agent_managed must be True or False, got {self.agent_managed!r}")
        n = self.index_entries
        if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
            raise ConfigError(f"skills.index_entries must be a count (an integer from 0), got {n!r}")

    def _config(self) -> dict[str, Any]:
        dirs = cast("tuple[str, ...]", self.dirs)  # made a tuple of strings by __post_init__
        config: dict[str, Any] = {"dirs": list(dirs), "agent_managed": self.agent_managed}
        if self.index_entries is not None:
            config["index_entries"] = self.index_entries
        return config
