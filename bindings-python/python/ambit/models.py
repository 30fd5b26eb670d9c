"""The models ambit talks to, one class per wire. Each only describes the model; the core builds it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union

from .errors import ConfigError

__all__ = ["Anthropic", "Model", "OpenAIChat", "OpenAIResponses", "TextToolCalls", "ToolChoice"]

#: Which tool use the model is asked for: ``"auto"``, ``"required"``, ``"none"``, or ``{"name": tool}``.
ToolChoice = Union[Literal["auto", "required", "none"], Mapping[str, str]]

#: The model settings every request carries, as the core names them (the core checks them, in one place).
_SETTINGS = ("max_output_tokens", "temperature", "top_p", "stop", "seed", "tool_choice", "parallel_tool_calls",
             "text_tool_calls", "reasoning_effort", "thinking_budget", "prompt_caching", "strict", "store")

#: How an answer's text is read for tool calls (Chat Completions): ``"off"``, ``"auto"`` or ``"constrained"``.
TextToolCalls = Literal["off", "auto", "constrained"]


@dataclass(frozen=True, init=False)
class Model:
    """What every wire takes: the model's name, where it is, and how to reach it.

    ``stream`` streams answers (SSE); ``timeout`` is the limit in seconds on one HTTP request (default
    600); ``max_retries`` the attempts after the first on 408, 409, 429, 5xx and connection errors, except
    errors the same request gets again (default 2); ``max_tool_name_bytes`` a limit on tool names smaller
    than the wire's own (64 bytes on Chat Completions, 128 on the others), for an endpoint that holds names
    shorter: longer names reach it cut to fit. A value above the wire's limit is refused (``ConfigError``
    naming it); ``context_window`` the tokens the model's window holds (default: the model family's, or
    32,768 for a model the core does not know), the window a session's auto-compaction fires at a share of.

    The model settings every request carries (absent ones are the server's): ``max_output_tokens`` (at
    least 1), ``temperature`` (0 to 2) and ``top_p`` (0 to 1) (neither on Anthropic, whose API has
    none), ``stop`` (1 to 4 non-empty texts; not on Responses), ``seed`` (Chat Completions only),
    ``tool_choice`` (``"auto"``, ``"required"``, ``"none"`` or ``{"name": tool}``) and
    ``parallel_tool_calls``; on Chat Completions ``text_tool_calls``: ``"auto"`` reads a tool call a model
    wrote as text (bare or fenced JSON, ``<tool_call>``, ``<|python_tag|>``, ``[TOOL_CALLS]``; only tools
    offered in that request; never when the server sent calls) as a call, marked ``from_text`` in its
    ``tool_call_requested`` event, and ``"constrained"`` also asks the server (llama.cpp) to constrain the
    answer to one such call or a JSON string; ``reasoning_effort`` (``"none"``, ``"minimal"``, ``"low"``,
    ``"medium"``, ``"high"``, ``"xhigh"`` or ``"max"``; Anthropic ``"low"`` to ``"max"``) and, on Anthropic,
    ``thinking_budget`` (extended thinking: at least 1,024 tokens, less than the answer's max tokens) and
    ``prompt_caching`` (on unless ``False``: ``cache_control`` on the tools and the system prompt, the
    stable prefix, each breakpoint only where the prefix may reach the model's minimum cacheable length;
    cache writes and reads are counted in the usage and cost). On the OpenAI wires ``strict`` (on unless
    ``False``): a function tool, or a typed answer's schema, in strict mode's subset (every property
    required, ``additionalProperties: false`` on every object, no ``default``, …) is sent with
    ``strict: true``, any other without it; on Responses ``store``: ``False`` is stateless use, the
    requests also asking for the reasoning items' encrypted content, sent back on the next request.
    ``tool_choice`` ``"required"`` or a named tool binds the model's first answer to each user message:
    once it has called a tool since, the requests say ``"auto"``; with ``thinking_budget`` only
    ``"auto"`` and ``"none"`` are taken.

    ``headers`` and ``query``: HTTP headers and URL query parameters every request carries, as for Azure
    OpenAI (``headers={"api-key": key}``, ``query={"api-version": "2024-10-21"}``) or OpenAI's
    ``OpenAI-Organization`` / ``OpenAI-Project``; a header replaces the wire's own of that name, and a
    name that is not a header's, or one the HTTP exchange sets itself, is refused naming it.

    A value out of range, or
    a setting the wire lacks, is refused when the agent is built (``ConfigError`` naming it and the
    wire)."""

    wire = ""
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    stream: bool = False
    timeout: float | None = None
    max_retries: int | None = None
    max_tool_name_bytes: int | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: Sequence[str] | None = None
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    text_tool_calls: TextToolCalls | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    prompt_caching: bool | None = None
    strict: bool | None = None
    store: bool | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    query: Mapping[str, str] | None = None

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = False, timeout: float | None = None, max_retries: int | None = None,
                 max_tool_name_bytes: int | None = None, context_window: int | None = None,
                 max_output_tokens: int | None = None,
                 temperature: float | None = None, top_p: float | None = None, stop: Sequence[str] | None = None,
                 seed: int | None = None, tool_choice: ToolChoice | None = None,
                 parallel_tool_calls: bool | None = None, text_tool_calls: TextToolCalls | None = None,
                 reasoning_effort: str | None = None, thinking_budget: int | None = None,
                 headers: Mapping[str, str] | None = None, query: Mapping[str, str] | None = None,
                 prompt_caching: bool | None = None, strict: bool | None = None,
                 store: bool | None = None) -> None:
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
        object.__setattr__(self, "max_output_tokens", max_output_tokens)
        object.__setattr__(self, "temperature", temperature)
        object.__setattr__(self, "top_p", top_p)
        # A list or tuple is kept as a tuple (the model is frozen); a lone text reaches the core, which
        # refuses it by name (`stop must be a list of texts`).
        object.__setattr__(self, "stop", tuple(stop) if isinstance(stop, (list, tuple)) else stop)
        object.__setattr__(self, "seed", seed)
        object.__setattr__(self, "tool_choice", dict(tool_choice) if isinstance(tool_choice, Mapping) else tool_choice)
        object.__setattr__(self, "parallel_tool_calls", parallel_tool_calls)
        object.__setattr__(self, "text_tool_calls", text_tool_calls)
        object.__setattr__(self, "reasoning_effort", reasoning_effort)
        object.__setattr__(self, "thinking_budget", thinking_budget)
        object.__setattr__(self, "prompt_caching", prompt_caching)
        object.__setattr__(self, "strict", strict)
        object.__setattr__(self, "store", store)
        # Copied, so the model stays as it was built; anything but a mapping reaches the core, which
        # refuses it by name.
        object.__setattr__(self, "headers", dict(headers) if isinstance(headers, Mapping) else headers)
        object.__setattr__(self, "query", dict(query) if isinstance(query, Mapping) else query)

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"wire": self.wire, "model": self.model, "stream": self.stream}
        for key in ("base_url", "api_key", "max_retries", "max_tool_name_bytes", "context_window", "headers", "query"):
            if getattr(self, key) is not None:
                config[key] = getattr(self, key)
        if self.timeout is not None:
            config["timeout_secs"] = self.timeout
        settings = {key: getattr(self, key) for key in _SETTINGS if getattr(self, key) is not None}
        for key, value in settings.items():
            # JSON has no NaN or infinity: the core could not name the setting it cannot read.
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f"{key} must be a finite number, got {value}")
        if settings:
            config["settings"] = {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()}
        return config

    def _config_json(self) -> str:
        return json.dumps(self._config())

    def _native_function(self) -> tuple[Callable[..., Any], bool] | None:
        """The function a test model answers with (``ambit.FunctionModel``); none for a hosted model."""
        return None


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
    to ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``; ``max_tokens`` bounds one answer (default 4096):
    the wire's own name for ``max_output_tokens``, so giving both with different values is refused."""

    wire = "anthropic"
    max_tokens: int | None = None

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 stream: bool = False, timeout: float | None = None, max_retries: int | None = None,
                 max_tokens: int | None = None, max_tool_name_bytes: int | None = None,
                 max_output_tokens: int | None = None, temperature: float | None = None, top_p: float | None = None,
                 stop: Sequence[str] | None = None, seed: int | None = None, tool_choice: ToolChoice | None = None,
                 parallel_tool_calls: bool | None = None, context_window: int | None = None,
                 reasoning_effort: str | None = None, thinking_budget: int | None = None,
                 headers: Mapping[str, str] | None = None, query: Mapping[str, str] | None = None,
                 prompt_caching: bool | None = None) -> None:
        super().__init__(model, base_url=base_url, api_key=api_key, stream=stream, timeout=timeout,
                         max_retries=max_retries, max_tool_name_bytes=max_tool_name_bytes,
                         max_output_tokens=max_output_tokens, temperature=temperature, top_p=top_p, stop=stop,
                         seed=seed, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                         context_window=context_window, reasoning_effort=reasoning_effort,
                         thinking_budget=thinking_budget, headers=headers, query=query,
                         prompt_caching=prompt_caching)
        object.__setattr__(self, "max_tokens", max_tokens)

    def _config(self) -> dict[str, Any]:
        config = super()._config()
        if self.max_tokens is not None:
            config["max_tokens"] = self.max_tokens
        return config
