"""MCP servers and deferral (SPEC §3–4), as plain data the core reads.

>>> import ambit
>>> server = ambit.McpServer.stdio("files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
...                                trusted=True, eager_load_tools=["read_file"])
>>> agent = ambit.Agent(model="gpt-4.1", mcp=[server], deferral=ambit.Deferral(setting="deferred"))

The server's tools are named ``mcp__<server>__<tool>``. Deferred tools (the default for MCP tools) are
listed by name in the catalog after the instructions, and their schemas are sent once the model loads
them with ``tool_load`` (``tool_search`` finds them by keyword)."""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike, fspath
from typing import Any, Literal, Mapping, Sequence

from ._options import mapping, paths, strings
from .errors import ConfigError
from .policy import Level

__all__ = ["Deferral", "DeferralSetting", "LoadStrategy", "McpProtocol", "McpServer"]

DeferralSetting = Literal["deferred", "eager", "hidden"]
LoadStrategy = Literal["append", "eager", "native"]
McpProtocol = Literal["initialize", "stateless", "auto"]


@dataclass(frozen=True)
class McpServer:
    """One MCP server. Make one with :meth:`stdio` (a child process) or :meth:`http` (streamable HTTP).

    ``trusted`` believes the server's annotations (``readOnlyHint`` gives level ``read``); ``levels``
    sets the level of a tool by the server's name for it, and wins; any other tool is ``unrestricted``.
    ``deferral`` is this server's setting (``None`` follows the agent's :class:`Deferral`), and the tools
    in ``eager_load_tools`` ship their schemas from the first request under every setting.
    ``protocol`` is the revision: ``initialize`` (2025-11-25), ``stateless`` (2026-07-28) or ``auto``.

    Credentials (the agent's :class:`~ambit.Credentials`, by alias) reach a server without reaching the
    model: an HTTP server's ``bearer`` alias is sent as ``Authorization: Bearer …``, ``credential_headers``
    maps a header to an alias, ``headers`` are static headers sent as given; a stdio server's
    ``credential_env`` maps an environment variable to an alias. A server's error quoting them reaches the
    model redacted."""

    name: str
    transport: Mapping[str, Any]
    protocol: McpProtocol = "initialize"
    trusted: bool = False
    levels: Mapping[str, Level] = field(default_factory=dict)
    deferral: DeferralSetting | None = None
    eager_load_tools: Sequence[str] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    credential_headers: Mapping[str, str] = field(default_factory=dict)
    bearer: str | None = None
    credential_env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def stdio(cls, name: str, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
              cwd: str | PathLike[str] | None = None, protocol: McpProtocol = "initialize", trusted: bool = False,
              levels: Mapping[str, Level] | None = None, deferral: DeferralSetting | None = None,
              eager_load_tools: Sequence[str] = (), credential_env: Mapping[str, str] | None = None) -> McpServer:
        """A server run as a child process speaking on its stdin and stdout; ``credential_env`` maps
        environment variables to credential aliases."""
        transport: dict[str, Any] = {"type": "stdio", "command": command,
                                     "args": paths(f"MCP server '{name}': args", args),
                                     "env": mapping(f"MCP server '{name}': env", env if env is not None else {},
                                                    lambda v: isinstance(v, str), "strings")}
        if cwd is not None:
            transport["cwd"] = fspath(cwd)
        return cls(name, transport, protocol, trusted, levels if levels is not None else {}, deferral,
                   eager_load_tools, credential_env=credential_env if credential_env is not None else {})

    @classmethod
    def http(cls, name: str, url: str, *, protocol: McpProtocol = "initialize", trusted: bool = False,
             levels: Mapping[str, Level] | None = None, deferral: DeferralSetting | None = None,
             eager_load_tools: Sequence[str] = (), headers: Mapping[str, str] | None = None,
             credential_headers: Mapping[str, str] | None = None, bearer: str | None = None) -> McpServer:
        """A server reached over streamable HTTP at ``url``; ``bearer`` and ``credential_headers`` name
        credential aliases, ``headers`` are sent as given."""
        return cls(name, {"type": "http", "url": url}, protocol, trusted, levels if levels is not None else {},
                   deferral, eager_load_tools, headers=headers if headers is not None else {},
                   credential_headers=credential_headers if credential_headers is not None else {},
                   bearer=bearer)

    def __post_init__(self) -> None:
        put = object.__setattr__
        put(self, "levels", mapping(f"MCP server '{self.name}': levels", self.levels, lambda v: isinstance(v, str),
                                    "levels"))
        put(self, "eager_load_tools", tuple(strings(f"MCP server '{self.name}': eager_load_tools",
                                                    self.eager_load_tools)))
        for what in ("headers", "credential_headers", "credential_env"):
            put(self, what, mapping(f"MCP server '{self.name}': {what}", getattr(self, what),
                                    lambda v: isinstance(v, str), "strings"))
        if self.bearer is not None and not isinstance(self.bearer, str):
            raise ConfigError(f"MCP server '{self.name}': bearer must be a credential alias (a string), "
                            f"got {type(self.bearer).__name__}")

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"name": self.name, "transport": dict(self.transport), "protocol": self.protocol,
                                  "trusted": self.trusted, "levels": dict(self.levels),
                                  "eager_load_tools": list(self.eager_load_tools)}
        if self.deferral is not None:
            config["deferral"] = self.deferral
        for what in ("headers", "credential_headers", "credential_env"):
            if getattr(self, what):
                config[what] = dict(getattr(self, what))
        if self.bearer is not None:
            config["bearer"] = self.bearer
        return config


@dataclass(frozen=True)
class Deferral:
    """How tools that may be deferred ship. ``setting`` is the install-wide one: MCP servers without
    their own, and the host tools named in ``deferrable_tools``, follow it (``deferred``: listed in the
    catalog until loaded; ``eager``: declared from the first request; ``hidden``: not registered at
    all). ``strategy`` is how a load reaches the provider: ``native`` (the default: the provider's own
    tool search and deferred loading where the model has it, Anthropic Messages on Claude Opus/Sonnet
    4.5+ and OpenAI Responses on GPT-5.4+, else as ``append``), ``append`` (the local catalog,
    ``tool_search`` and ``tool_load``; a loaded schema joins the tools) or ``eager`` (every schema from
    the first request)."""

    setting: DeferralSetting = "deferred"
    strategy: LoadStrategy = "native"
    deferrable_tools: Sequence[str] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "deferrable_tools", tuple(strings("deferrable_tools", self.deferrable_tools)))

    def _config(self) -> dict[str, Any]:
        return {"setting": self.setting, "strategy": self.strategy, "deferrable_tools": list(self.deferrable_tools)}
