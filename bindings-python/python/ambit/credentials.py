"""The credential broker in the Python face of ambit (SPEC §15): credentials registered by alias and
delivered to the tools that declare them, never to the model. Every rule (which tool gets what, the
shell's environment, web_fetch's hosts, the redactor) lives in the Rust core; this module only gathers
the registrations as data and hands the callbacks over."""

from __future__ import annotations

import inspect
from typing import Any, Awaitable, Callable, Union

from .errors import ConfigError

#: A callback producing a credential's value, plain or async; it gets the alias.
CredentialCallback = Callable[[str], Union[str, Awaitable[str]]]


class Credentials:
    """Credentials by alias, for ``Agent(credentials=...)``::

        creds = (ambit.Credentials()
                 .value("github", token)                 # a fixed value
                 .env("openai", "OPENAI_API_KEY")        # read from the environment when needed
                 .callback("vault", fetch_token)         # run on demand, plain or async
                 .shell_env("GITHUB_TOKEN", "github")    # shell_execute gets $GITHUB_TOKEN
                 .web_fetch("api.github.com", "github")) # web_fetch sends Authorization: Bearer … there

    A tool declares the aliases it needs (``@ambit.tool(credentials=["github"])``) and reads them from
    its context (``ctx.credential("github")``, a parameter annotated :class:`ambit.ToolContext`). Every
    tool result and error passes the core's redactor: the model sees ``[credential:github]``."""

    __slots__ = ("_sources", "_shell_env", "_web_fetch", "_callbacks")

    def __init__(self) -> None:
        self._sources: dict[str, dict[str, Any]] = {}
        self._shell_env: dict[str, str] = {}
        self._web_fetch: list[dict[str, Any]] = []
        self._callbacks: list[tuple[str, Callable[[str], Any], bool]] = []

    def _add(self, alias: str, source: dict[str, Any]) -> Credentials:
        if not isinstance(alias, str):
            raise ConfigError(f"a credential alias must be a string, got {alias!r}")
        if alias in self._sources:
            raise ConfigError(f"credential alias '{alias}' is registered twice")
        self._sources[alias] = source
        return self

    def value(self, alias: str, value: str) -> Credentials:
        """A credential with a fixed value."""
        if not isinstance(value, str):
            raise ConfigError(f"credential '{alias}': the value must be a string")
        return self._add(alias, {"value": value})

    def env(self, alias: str, var: str) -> Credentials:
        """A credential read from the environment variable ``var`` each time it is needed."""
        if not isinstance(var, str):
            raise ConfigError(f"credential '{alias}': the environment variable must be named by a string")
        return self._add(alias, {"env": var})

    def callback(self, alias: str, fn: CredentialCallback) -> Credentials:
        """A credential the host produces on demand, each time a tool needs it: ``fn(alias)``, plain or
        async, returns the value."""
        if not callable(fn):
            raise ConfigError(f"credential '{alias}': the callback must be callable, got {fn!r}")
        self._add(alias, {"callback": True})
        is_async = inspect.iscoroutinefunction(fn)
        self._callbacks.append((alias, fn, is_async))
        return self

    def shell_env(self, var: str, alias: str) -> Credentials:
        """``shell_execute`` runs with ``var`` set to the credential ``alias``."""
        self._shell_env[str(var)] = str(alias)
        return self

    def web_fetch(self, host: str, alias: str, *, header: str = "authorization",
                  prefix: str | None = None) -> Credentials:
        """``web_fetch`` adds ``header: <prefix><value>`` to requests for ``host`` (default
        ``Authorization: Bearer <value>``)."""
        rule: dict[str, Any] = {"host": host, "alias": alias, "header": header}
        if prefix is not None:
            rule["prefix"] = prefix
        self._web_fetch.append(rule)
        return self

    def _config(self) -> dict[str, Any]:
        return {"credentials": dict(self._sources), "shell_env": dict(self._shell_env),
                "web_fetch": list(self._web_fetch)}

    def __repr__(self) -> str:
        return f"Credentials(aliases={sorted(self._sources)!r})"
