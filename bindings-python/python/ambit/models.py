"""The models ambit talks to, one class per wire. Each only describes the model; the core builds it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

__all__ = ["Anthropic", "Model", "OpenAIChat", "OpenAIResponses"]


@dataclass(frozen=True, init=False)
class Model:
    """What every wire takes: the model's name, where it is, and how to reach it.

    ``stream`` streams answers (SSE); ``timeout`` is the limit in seconds on one HTTP request (default
    600); ``max_retries`` the attempts after the first on 408, 409, 429, 5xx and connection errors, except
    errors the same request gets again (default 2); ``max_tool_name_bytes`` a limit on tool names smaller
    than the wire's own (64 bytes on Chat Completions, 128 on the others), for an endpoint that holds names
    shorter: longer names reach it cut to fit. A value above the wire's limit is refused (``ConfigError``
    naming it); ``context_window`` the tokens the model's window holds (default: the model family's, or
    32,768 for a model the core does not know), the window a session's auto-compaction fires at a share of."""

    wire = ""
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    stream: bool = False
    timeout: float | None = None
    max_retries: int | None = None
    max_tool_name_bytes: int | None = None
    context_window: int | None = None

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = False, timeout: float | None = None, max_retries: int | None = None,
                 max_tool_name_bytes: int | None = None, context_window: int | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{type(self).__name__} needs a model name, got {model!r}")
        if not isinstance(stream, bool):
            raise TypeError(f"stream must be True or False, got {stream!r}")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "base_url", base_url)
        object.__setattr__(self, "api_key", api_key)
        object.__setattr__(self, "stream", stream)
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "max_retries", max_retries)
        object.__setattr__(self, "max_tool_name_bytes", max_tool_name_bytes)
        object.__setattr__(self, "context_window", context_window)

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"wire": self.wire, "model": self.model, "stream": self.stream}
        for key in ("base_url", "api_key", "max_retries", "max_tool_name_bytes", "context_window"):
            if getattr(self, key) is not None:
                config[key] = getattr(self, key)
        if self.timeout is not None:
            config["timeout_secs"] = self.timeout
        return config

    def _config_json(self) -> str:
        return json.dumps(self._config())


@dataclass(frozen=True, init=False)
class OpenAIChat(Model):
    """A model on the OpenAI Chat Completions wire; any OpenAI-compatible server works by ``base_url``.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``."""

    wire = "openai_chat"


@dataclass(frozen=True, init=False)
class OpenAIResponses(Model):
    """A model on the OpenAI Responses wire. ``base_url`` and ``api_key`` default to
    ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``."""

    wire = "openai_responses"


@dataclass(frozen=True, init=False)
class Anthropic(Model):
    """A model on the Anthropic Messages wire. ``base_url`` (ending in ``/v1``) and ``api_key`` default
    to ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``; ``max_tokens`` bounds one answer (default 4096)."""

    wire = "anthropic"
    max_tokens: int | None = None

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = False, timeout: float | None = None, max_retries: int | None = None,
                 max_tokens: int | None = None, max_tool_name_bytes: int | None = None,
                 context_window: int | None = None) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, stream=stream, timeout=timeout,
                         max_retries=max_retries, max_tool_name_bytes=max_tool_name_bytes,
                         context_window=context_window)
        object.__setattr__(self, "max_tokens", max_tokens)

    def _config(self) -> dict[str, Any]:
        config = super()._config()
        if self.max_tokens is not None:
            config["max_tokens"] = self.max_tokens
        return config
