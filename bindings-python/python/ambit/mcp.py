"""MCP servers and deferral (SPEC §3–4), as plain data the core reads.

>>> import ambit
>>> server = ambit.McpServer.stdio("files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
...                                trusted=True, eager_load_tools=["read_file"])
>>> agent = ambit.Agent(model="gpt-4.1", mcp=[server], deferral=ambit.Deferral(setting="deferred"))

The server's tools are named ``mcp__<server>__<tool>``. Deferred tools (the default for MCP tools) are
listed by name in the catalog after the instructions, and their schemas are sent once the model loads
them with ``tool_load`` (``tool_search`` finds them by keyword)."""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from os import PathLike, fspath
from typing import Any, Callable, Literal, Mapping, Protocol, Sequence, Union

from ._options import mapping, paths, strings
from .errors import ConfigError
from .policy import Level

__all__ = ["Deferral", "DeferralSetting", "ElicitationRequest", "ElicitationAnswer", "LoadStrategy", "McpProtocol",
           "McpServer", "OAuth", "TokenStore"]

DeferralSetting = Literal["deferred", "eager", "hidden"]
LoadStrategy = Literal["append", "eager", "native"]
McpProtocol = Literal["initialize", "stateless", "auto"]


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    """A host callback's value: a coroutine function runs to completion on its own event loop (host
    callbacks run on a thread of their own)."""
    out = fn(*args)
    if inspect.iscoroutine(out):
        return asyncio.run(out)
    return out


class TokenStore(Protocol):
    """Where an MCP server's OAuth tokens are kept, by key (the server's URL): an opaque text per key.
    Its methods may be plain or ``async``."""

    def load(self, key: str) -> Any: ...
    def save(self, key: str, value: str) -> Any: ...
    def clear(self, key: str) -> Any: ...


@dataclass(frozen=True)
class ElicitationRequest:
    """An MCP server asks the user for input: ``mode`` ``form`` (answer with a mapping matching ``schema``,
    a JSON schema) or ``url`` (the user visits ``url``)."""

    server: str
    message: str
    mode: str
    schema: Mapping[str, Any] | None = None
    url: str | None = None


#: A handler's answer: a mapping (accepted, with that content), or ``"decline"`` or ``"cancel"``.
ElicitationAnswer = Union[Mapping[str, Any], Literal["accept", "decline", "cancel"]]


@dataclass(frozen=True)
class OAuth:
    """OAuth 2.1 for an HTTP MCP server (the MCP authorization spec): on the server's 401 the client
    discovers its authorization server, registers (``client_id`` if pre-registered, the
    ``client_metadata_url`` document if the server takes one, else dynamic registration), and asks for
    the user's consent: ``on_authorize(url)`` gets the authorization URL (open it in a browser) and
    returns the URL the browser was redirected to (``redirect_uri?code=…&state=…``). Tokens are refreshed,
    and re-requested with more scopes on a 403 ``insufficient_scope``. ``grant="client_credentials"``
    needs ``client_id`` and ``client_secret`` (a credential alias) and no user.

    ``token_store`` keeps the tokens: ``None`` in memory, a path (a JSON file, mode 0600), or a
    :class:`TokenStore`. Tokens never reach the model, events or the session store.

    ``issuer`` pins the authorization server (its issuer URL): one the MCP server's metadata names
    differently is refused. Without it, a ``client_secret`` goes only to an authorization server on the
    MCP server's own host.

    ``refresh_lock_timeout`` (seconds, default 30) bounds the wait for the token store's refresh guard
    (another client refreshing): past it the request fails with ``refresh_lock_timeout``, naming the lock."""

    redirect_uri: str | None = None
    on_authorize: Callable[[str], Any] | None = None
    client_name: str | None = None
    scopes: Sequence[str] = ()
    client_id: str | None = None
    client_secret: str | None = None
    client_metadata_url: str | None = None
    grant: Literal["authorization_code", "client_credentials"] = "authorization_code"
    token_store: TokenStore | str | PathLike[str] | None = None
    issuer: str | None = None
    refresh_lock_timeout: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", tuple(strings("oauth.scopes", self.scopes)))
        for what in ("redirect_uri", "client_name", "client_id", "client_secret", "client_metadata_url", "issuer"):
            value = getattr(self, what)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"oauth.{what} must be a string, got {type(value).__name__}")
        if self.grant not in ("authorization_code", "client_credentials"):
            raise ConfigError(f"oauth.grant must be 'authorization_code' or 'client_credentials', got {self.grant!r}")
        bound = self.refresh_lock_timeout
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float)) or not bound > 0):
            raise ConfigError(f"oauth.refresh_lock_timeout must be a positive number of seconds, got {bound!r}")
        if self.on_authorize is not None and not callable(self.on_authorize):
            raise ConfigError(f"oauth.on_authorize must be callable, got {type(self.on_authorize).__name__}")
        store = self.token_store
        if store is not None and not isinstance(store, (str, PathLike)):
            missing = [m for m in ("load", "save", "clear") if not callable(getattr(store, m, None))]
            if missing:
                raise ConfigError(f"oauth.token_store must be a path or have load, save and clear; "
                                  f"{type(store).__name__} lacks {', '.join(missing)}")

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"grant": self.grant}
        for what in ("redirect_uri", "client_name", "client_id", "client_secret", "client_metadata_url", "issuer"):
            if getattr(self, what) is not None:
                config[what] = getattr(self, what)
        if self.scopes:
            config["scopes"] = list(self.scopes)
        if isinstance(self.token_store, (str, PathLike)):
            config["token_file"] = fspath(self.token_store)
        if self.refresh_lock_timeout is not None:
            config["refresh_lock_timeout_ms"] = max(1, round(self.refresh_lock_timeout * 1000))
        return config

    def _hooks(self, server: str) -> list[tuple[str, str, Callable[[str], str]]]:
        hooks: list[tuple[str, str, Callable[[str], str]]] = []
        on_authorize = self.on_authorize
        if on_authorize is not None:
            def authorize(url: str) -> str:
                back = _run(on_authorize, url)
                if not isinstance(back, str):
                    raise TypeError(f"on_authorize must return the redirect URL (a string), got {type(back).__name__}")
                return back
            hooks.append((server, "authorize", authorize))
        store = self.token_store
        if store is not None and not isinstance(store, (str, PathLike)):
            def operate(op_json: str) -> str:
                op = json.loads(op_json)
                if op["op"] == "load":
                    value = _run(store.load, op["key"])
                    if value is not None and not isinstance(value, str):
                        raise TypeError(f"token_store.load must return a string or None, got {type(value).__name__}")
                    return json.dumps(value)
                if op["op"] == "save":
                    _run(store.save, op["key"], op["value"])
                else:
                    _run(store.clear, op["key"])
                return "null"
            hooks.append((server, "token_store", operate))
        return hooks


def _elicit_hook(server: str, handler: Callable[[ElicitationRequest], Any]) -> Callable[[str], str]:
    def elicit(request_json: str) -> str:
        r = json.loads(request_json)
        answer = _run(handler, ElicitationRequest(r["server"], r["message"], r["mode"], r.get("schema"), r.get("url")))
        if answer in ("decline", "cancel"):
            return json.dumps({"action": answer})
        if answer == "accept":
            return json.dumps({"action": "accept"})
        if isinstance(answer, Mapping):
            return json.dumps({"action": "accept", "content": dict(answer)})
        raise TypeError(f"the elicitation handler must return a mapping, 'decline' or 'cancel', got {answer!r}")
    return elicit


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
    oauth: OAuth | None = None
    on_elicit: Callable[[ElicitationRequest], Any] | None = None

    @classmethod
    def stdio(cls, name: str, command: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
              cwd: str | PathLike[str] | None = None, protocol: McpProtocol = "initialize", trusted: bool = False,
              levels: Mapping[str, Level] | None = None, deferral: DeferralSetting | None = None,
              eager_load_tools: Sequence[str] = (), credential_env: Mapping[str, str] | None = None,
              on_elicit: Callable[[ElicitationRequest], Any] | None = None) -> McpServer:
        """A server run as a child process speaking on its stdin and stdout; ``credential_env`` maps
        environment variables to credential aliases; ``on_elicit`` answers the server's requests for
        the user's input (declined without it)."""
        transport: dict[str, Any] = {"type": "stdio", "command": command,
                                     "args": paths(f"MCP server '{name}': args", args),
                                     "env": mapping(f"MCP server '{name}': env", env if env is not None else {},
                                                    lambda v: isinstance(v, str), "strings")}
        if cwd is not None:
            transport["cwd"] = fspath(cwd)
        return cls(name, transport, protocol, trusted, levels if levels is not None else {}, deferral,
                   eager_load_tools, credential_env=credential_env if credential_env is not None else {},
                   on_elicit=on_elicit)

    @classmethod
    def http(cls, name: str, url: str, *, protocol: McpProtocol = "initialize", trusted: bool = False,
             levels: Mapping[str, Level] | None = None, deferral: DeferralSetting | None = None,
             eager_load_tools: Sequence[str] = (), headers: Mapping[str, str] | None = None,
             credential_headers: Mapping[str, str] | None = None, bearer: str | None = None,
             oauth: OAuth | None = None, on_elicit: Callable[[ElicitationRequest], Any] | None = None) -> McpServer:
        """A server reached over streamable HTTP at ``url``; ``bearer`` and ``credential_headers`` name
        credential aliases, ``headers`` are sent as given; ``oauth`` authorizes with :class:`OAuth`;
        ``on_elicit`` answers the server's requests for the user's input (declined without it)."""
        return cls(name, {"type": "http", "url": url}, protocol, trusted, levels if levels is not None else {},
                   deferral, eager_load_tools, headers=headers if headers is not None else {},
                   credential_headers=credential_headers if credential_headers is not None else {},
                   bearer=bearer, oauth=oauth, on_elicit=on_elicit)

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
        if self.oauth is not None and not isinstance(self.oauth, OAuth):
            raise ConfigError(f"MCP server '{self.name}': oauth must be an ambit.OAuth, got {type(self.oauth).__name__}")
        if self.on_elicit is not None and not callable(self.on_elicit):
            raise ConfigError(f"MCP server '{self.name}': on_elicit must be callable, "
                              f"got {type(self.on_elicit).__name__}")

    def _hooks(self) -> list[tuple[str, str, Callable[[str], str]]]:
        """The host callbacks, handed to the core beside the configuration."""
        hooks = self.oauth._hooks(self.name) if self.oauth is not None else []
        if self.on_elicit is not None:
            hooks.append((self.name, "elicit", _elicit_hook(self.name, self.on_elicit)))
        return hooks

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
        if self.oauth is not None:
            config["oauth"] = self.oauth._config()
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
