"""Knowledge (SPEC §14): documents an agent opens on demand, in a knowledge directory.

``Agent(..., knowledge=Knowledge("kb"))`` gives the agent ``knowledge_list`` (names, types, sizes) and
``knowledge_read`` (a text document inline up to a cap; a larger or binary one as a path the file tools
open under the agent's policy scope). Publishing is the host's operation::

    kb = ambit.Knowledge("/srv/agents/support/kb")
    kb.publish("refund-policy", "# Refunds\\nOver 500 EUR: a second approver.")   # refund-policy.md

Text documents only, at most 200 KB; an existing document is replaced only with ``overwrite=True``.
Every rule lives in the Rust core; this module only translates."""

from __future__ import annotations

import json
from dataclasses import dataclass
from os import PathLike, fspath
from typing import Any, Mapping, Union

from . import _native
from ._options import lone_surrogate
from .errors import AmbitError

__all__ = ["Knowledge", "KnowledgeError", "InvalidKnowledgeArgument", "KnowledgeExists", "Published"]


class KnowledgeError(AmbitError):
    """A knowledge call refused or failed; ``code`` as in every language."""

    code = "knowledge_io"


class InvalidKnowledgeArgument(KnowledgeError, ValueError):
    """An argument out of bounds or malformed; ``field`` names it."""

    code = "knowledge_invalid_argument"
    field: str = ""


class KnowledgeExists(KnowledgeError, FileExistsError):
    """A document of that name exists and ``overwrite`` was off."""

    code = "knowledge_exists"


_BY_CODE: dict[str, type[KnowledgeError]] = {c.code: c for c in (InvalidKnowledgeArgument, KnowledgeExists)}


def _from_core(code: str, message: str, details: Mapping[str, Any]) -> KnowledgeError:
    """Called by the native module to turn a knowledge error into its exception."""
    exc = _BY_CODE.get(code, KnowledgeError)(message, code=code)
    for key, value in details.items():
        setattr(exc, key, value)
    return exc


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _from_core("knowledge_invalid_argument",
                         f"invalid knowledge argument '{name}': must be a string, got {type(value).__name__}",
                         {"field": name})
    at = lone_surrogate(value)
    if at is not None:
        raise _from_core("knowledge_invalid_argument",
                         f"invalid knowledge argument '{name}': is not valid Unicode text (a lone surrogate at "
                         f"index {at})", {"field": name})
    return value


@dataclass(frozen=True)
class Published:
    """What :meth:`Knowledge.publish` wrote: the document's name (``.md`` added when it had no
    extension), its path, its size, and whether it replaced one."""

    name: str
    path: str
    bytes: int
    replaced: bool


@dataclass(frozen=True)
class Knowledge:
    """A knowledge directory. ``dir``: absolute, or relative to the policy's working directory (for the
    agent; for :meth:`publish`, to the process's). ``inline_max_bytes``: the most bytes of text
    ``knowledge_read`` returns inline (default 64 KiB, at most 1 MiB)."""

    dir: Union[str, "PathLike[str]"]
    inline_max_bytes: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.dir, (str, PathLike)):
            raise _from_core("knowledge_invalid_argument",
                             f"invalid knowledge argument 'dir': must be a path, got {type(self.dir).__name__}",
                             {"field": "dir"})
        object.__setattr__(self, "dir", _text("dir", fspath(self.dir)))

    def publish(self, name: str, content: str, *, overwrite: bool = False) -> Published:
        """Publishes a text document (at most 200 KB) into the directory, made if missing; the agent sees
        it on its next request. An existing document of that name is replaced only with ``overwrite``
        (else :class:`KnowledgeExists`)."""
        if not isinstance(overwrite, bool):
            raise _from_core("knowledge_invalid_argument",
                             f"invalid knowledge argument 'overwrite': must be True or False, got {overwrite!r}",
                             {"field": "overwrite"})
        out = _native.knowledge_publish(str(self.dir), _text("name", name), _text("content", content), overwrite)
        return Published(**json.loads(out))

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"dir": self.dir}
        if self.inline_max_bytes is not None:
            config["inline_max_bytes"] = self.inline_max_bytes
        return config
