"""Hooks and guardrails: your code on the way of a run.

A :class:`Hook` runs at one point of every run of the agent (:data:`HookPoint`) and may change what
passes there; a :class:`Guardrail` checks the run's input (beside the first model request) or its final
answer, and stops the run with :class:`ambit.GuardrailTripped` when it trips. Both are plain or ``async``
functions taking ``(ctx, payload)``: ``ctx`` is a :class:`HookContext` (``ctx.context`` is the run's
``context``), ``payload`` the JSON the core hands over (what the model sees: tool results after the
credential redactor, so ``[credential:alias]``, never a value):

- ``run_start``: ``{"input": [messages]}``; ``run_end``: the result's fields (``output``, ``tool_calls``,
  ``usage``, ``messages``, …). Both observe: return ``None``.
- ``before_model_request``: ``{"turn", "instructions", "messages", "tools"}``; ``Replace({"instructions":
  ..., "messages": [...]})`` replaces either (the messages in the core's dict form).
- ``after_model_response``: ``{"turn", "text", "tool_calls": [{"id", "name", "arguments"}]}``;
  ``Replace({"text": ..., "tool_calls": [...]})``.
- ``before_tool_call``: ``{"id", "name", "arguments"}``; ``Replace(new_arguments)``, or ``Refuse(reason)``:
  the tool does not run and the model sees the reason.
- ``after_tool_call``: ``{"id", "name", "arguments", "result", "is_error"}``; ``Replace("new result")``.

Returning ``None`` goes on unchanged. A hook that raises ends the run with :class:`ambit.HookFailed`
naming it; a session stores nothing of that run."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Literal, TypeVar, Union, get_args

from .errors import ConfigError

__all__ = ["Guardrail", "GuardrailVerdict", "Hook", "HookContext", "HookPoint", "HookResult", "Refuse", "Replace"]

HookPoint = Literal["run_start", "run_end", "before_model_request", "after_model_response", "before_tool_call",
                    "after_tool_call"]
"""Where a hook runs."""

T = TypeVar("T")


@dataclass(frozen=True)
class Replace:
    """A hook's answer: go on with ``value`` instead (what it replaces depends on the point)."""

    value: Any


@dataclass(frozen=True)
class Refuse:
    """A ``before_tool_call`` hook's answer: the call does not run; the model sees ``reason``."""

    reason: str


HookResult = Union[Replace, Refuse, None]


@dataclass(frozen=True)
class GuardrailVerdict:
    """A guardrail's answer: ``tripped`` stops the run; ``info`` (any JSON value) is carried by
    :class:`ambit.GuardrailTripped` (as ``verdict``) and the ``guardrail_checked`` event."""

    tripped: bool
    info: Any = None


class HookContext(Generic[T]):
    """What a hook or guardrail knows of its run: its own ``name`` and the run's ``context`` (the value
    given to ``agent.run(..., context=...)``, typed as the annotation says)."""

    __slots__ = ("name", "_context")

    def __init__(self, name: str, context: int) -> None:
        self.name = name
        self._context = context

    @property
    def context(self) -> T:
        """The run's host value; a run given none raises :class:`ConfigError`."""
        from . import TaskContext
        value: T = TaskContext[T](0, None, self._context).context
        return value


HookFunction = Callable[[HookContext[Any], dict[str, Any]], Union[HookResult, Awaitable[HookResult]]]
GuardrailFunction = Callable[[HookContext[Any], dict[str, Any]],
                             Union[GuardrailVerdict, Awaitable[GuardrailVerdict]]]


def _name(fn: Callable[..., Any], name: str | None, what: str) -> str:
    if not callable(fn):
        raise TypeError(f"a {what} needs a function, got {fn!r}")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"a {what}'s name must be a string, got {name!r}")
    return name if name is not None else getattr(fn, "__name__", "")


def _native_function(fn: Callable[..., Any], name: str, answer: Callable[[Any], Any]) -> tuple[Any, bool]:
    """``fn`` as the core calls a host function: ``call(envelope, token) -> JSON text``, where the
    envelope is ``[payload, credentials, context]``."""
    is_async = inspect.iscoroutinefunction(fn)

    def args(envelope: str) -> tuple[HookContext[Any], dict[str, Any]]:
        payload, _credentials, context = json.loads(envelope)
        return HookContext(name, context), payload

    if is_async:
        async def call(envelope: str, token: int) -> str:
            return json.dumps(answer(await fn(*args(envelope))))
    else:
        def call(envelope: str, token: int) -> str:  # type: ignore[misc]
            return json.dumps(answer(fn(*args(envelope))))
    return call, is_async


class Hook:
    """A function run at ``point`` of every run: ``Hook("after_tool_call", upper)``. ``name`` (default:
    the function's) is what :class:`ambit.HookFailed` names when it raises."""

    __slots__ = ("point", "fn", "name")

    def __init__(self, point: HookPoint, fn: HookFunction, *, name: str | None = None) -> None:
        if point not in get_args(HookPoint):
            raise ConfigError(f"there is no hook point '{point}' (points: {', '.join(get_args(HookPoint))})")
        self.point: HookPoint = point
        self.name: str = _name(fn, name, "hook")
        self.fn = fn

    def __repr__(self) -> str:
        return f"Hook({self.point!r}, name={self.name!r})"

    def _native_entry(self) -> tuple[str, str, Any, bool]:
        point = self.point

        def answer(result: Any) -> Any:
            if result is None:
                return None
            if isinstance(result, Replace):
                return {"action": "replace", "value": result.value}
            if isinstance(result, Refuse):
                return {"action": "refuse", "reason": result.reason}
            raise TypeError(f"a {point} hook returns None, ambit.Replace or ambit.Refuse, got {result!r}")

        call, is_async = _native_function(self.fn, self.name, answer)
        return (self.name, self.point, call, is_async)


class Guardrail:
    """A check of the run's input (``Agent(input_guardrails=[...])``: ``payload`` is ``{"input": the
    last user message, "messages": [...]}``) or its final answer (``output_guardrails``: ``{"output":
    text, "structured_output": value or None}``), answering a :class:`GuardrailVerdict`."""

    __slots__ = ("fn", "name")

    def __init__(self, fn: GuardrailFunction, *, name: str | None = None) -> None:
        self.name: str = _name(fn, name, "guardrail")
        self.fn = fn

    def __repr__(self) -> str:
        return f"Guardrail(name={self.name!r})"

    def _native_entry(self, kind: str) -> tuple[str, str, Any, bool]:
        def answer(result: Any) -> Any:
            if not isinstance(result, GuardrailVerdict):
                raise TypeError(f"a guardrail returns an ambit.GuardrailVerdict, got {result!r}")
            return {"tripped": result.tripped, "info": result.info}

        call, is_async = _native_function(self.fn, self.name, answer)
        return (self.name, kind, call, is_async)
