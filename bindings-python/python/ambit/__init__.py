"""ambit: tool-using LLM agents, one Rust core.

>>> import ambit
>>> @ambit.tool
... def get_weather(city: str) -> str:
...     '''Current weather for a city.'''
...     return "sunny"
>>> agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url="http://127.0.0.1:8080/v1"),
...                     instructions="You answer weather questions.", tools=[get_weather])
>>> # result = await agent.run("Weather in Paris?")   or   agent.run_sync(...) outside asyncio
"""

from __future__ import annotations

import asyncio
import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Union, overload

from . import _native
from ._schema import function_schema
from .errors import AmbitError, ConfigError, MaxTurnsExceeded, ModelError, RunCancelled

__all__ = [
    "Agent",
    "AmbitError",
    "ConfigError",
    "MaxTurnsExceeded",
    "ModelError",
    "OpenAIChat",
    "RunCancelled",
    "RunResult",
    "Tool",
    "ToolCall",
    "Usage",
    "tool",
]

__version__: str = _native.__version__


@dataclass(frozen=True)
class OpenAIChat:
    """A model on the OpenAI Chat Completions wire; any OpenAI-compatible server works by ``base_url``.

    ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"OpenAIChat needs a model name, got {model!r}")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "base_url", base_url)
        object.__setattr__(self, "api_key", api_key)


@dataclass(frozen=True)
class Usage:
    """Tokens used, summed over a run's model requests."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a run: what the model asked for and what it got back."""

    id: str
    name: str
    arguments: Any
    result: str
    is_error: bool


@dataclass(frozen=True)
class RunResult:
    """What a finished run returns."""

    output: str
    tool_calls: list[ToolCall]
    usage: Usage
    turns: int
    messages: list[dict[str, Any]]


class Tool:
    """A Python function the model can call. Make one with :func:`tool`."""

    __slots__ = ("fn", "name", "description", "parameters", "is_async")

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 parameters: Mapping[str, Any] | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"a tool needs a function, got {fn!r}")
        self.fn = fn
        self.name: str = name or getattr(fn, "__name__", "")
        doc_description, schema = function_schema(fn, self.name) if parameters is None else ("", dict(parameters))
        self.description: str = description if description is not None else doc_description
        self.parameters: dict[str, Any] = schema
        self.is_async: bool = inspect.iscoroutinefunction(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def _native_entry(self) -> tuple[str, str, str, Callable[[str], Any], bool]:
        fn = self.fn
        if self.is_async:
            async def call(arguments: str) -> str:
                return _to_text(await fn(**json.loads(arguments)))
        else:
            def call(arguments: str) -> str:  # type: ignore[misc]
                return _to_text(fn(**json.loads(arguments)))
        return (self.name, self.description, json.dumps(self.parameters), call, self.is_async)


def _to_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


ToolLike = Union[Tool, Callable[..., Any]]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None,
         parameters: Mapping[str, Any] | None = None) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         parameters: Mapping[str, Any] | None = None) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Makes a tool from a plain or async function. The schema comes from the type hints and the
    description from the docstring (an ``Args:`` section describes the parameters), unless given.

    Use as ``@tool`` or ``@tool(name=..., description=..., parameters=...)``. What the function
    returns reaches the model as text: a string as is, anything else as JSON. An exception it raises
    becomes an error result the model sees; the run goes on."""
    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, parameters=parameters)
    return wrap(fn) if fn is not None else wrap


class Agent:
    """An agent: a model, instructions and tools.

    ``await agent.run(input)`` drives the loop to the final answer; ``agent.run_sync(input)`` does the
    same outside asyncio."""

    def __init__(self, *, model: OpenAIChat | str, instructions: str | None = None,
                 tools: Iterable[ToolLike] = (), max_turns: int | None = None) -> None:
        if isinstance(model, str):
            model = OpenAIChat(model)
        if not isinstance(model, OpenAIChat):
            raise TypeError(f"model must be an OpenAIChat or a model name, got {type(model).__name__}")
        if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1):
            raise ConfigError(f"max_turns must be a positive integer, got {max_turns!r}")
        self.model = model
        self.instructions = instructions
        self.tools: list[Tool] = [t if isinstance(t, Tool) else Tool(t) for t in tools]
        self._native = _native.NativeAgent(
            model.model, [t._native_entry() for t in self.tools], base_url=model.base_url,
            api_key=model.api_key, instructions=instructions, max_turns=max_turns)

    async def run(self, input: str) -> RunResult:
        """Runs the loop from one user message to the final answer."""
        if not isinstance(input, str):
            raise TypeError(f"input must be a string, got {type(input).__name__}")
        return _result(json.loads(await self._native.run(input)))

    def run_sync(self, input: str) -> RunResult:
        """:meth:`run` for code outside asyncio. Inside a running event loop, ``await run()`` instead."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(input))
        raise RuntimeError("run_sync() was called inside a running event loop; use `await agent.run(...)`")


def _result(raw: dict[str, Any]) -> RunResult:
    return RunResult(
        output=raw["output"],
        tool_calls=[ToolCall(**c) for c in raw["tool_calls"]],
        usage=Usage(**raw["usage"]),
        turns=raw["turns"],
        messages=raw["messages"],
    )


