"""The exceptions ambit raises. Every one is an :class:`AmbitError` with a stable ``code``, the same
code the Rust, Node and Swift bindings report."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["AmbitError", "BudgetExceeded", "ConfigError", "InternalError", "ModelError", "MaxTurnsExceeded",
           "InvalidMessage", "OutputTruncated", "OutputInvalid", "RunCancelled", "SessionBusy", "SessionNotParked",
           "HookFailed", "GuardrailTripped"]


class AmbitError(Exception):
    """Base class of every ambit error."""

    code: str = "ambit"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ConfigError(AmbitError, ValueError):
    """The agent or a tool was configured wrongly (a duplicate tool name, a schema that is not an object…)."""

    code = "config"


class ModelError(AmbitError):
    """The model provider failed: an HTTP error (``status`` set), no connection, or an unreadable answer."""

    code = "model_http"
    status: int | None = None


class MaxTurnsExceeded(AmbitError):
    """The run reached its turn limit without a final answer. ``usage`` holds what it used."""

    code = "max_turns"
    max_turns: int = 0
    usage: dict[str, int]


class BudgetExceeded(AmbitError):
    """The run went past a hard budget. ``budget`` is ``"tokens"`` or ``"cost"``; ``limit`` and ``spent``
    are in its unit; ``usage`` (and ``cost``, when the price table has the model) is what the run used."""

    code = "budget_exceeded"
    budget: str = ""
    limit: float = 0.0
    spent: float = 0.0
    cost: float | None = None
    usage: dict[str, int]


class OutputTruncated(AmbitError):
    """The model's output token limit cut its answer in the middle of tool calls (``tools``, by name):
    their arguments are incomplete, so none of them ran. ``usage`` is what the run used."""

    code = "output_truncated"
    tools: list[str]
    usage: dict[str, int]


class OutputInvalid(AmbitError):
    """The model's final answer did not match the agent's ``output_type``, after the wrong answers went
    back to it ``retries`` times. ``attempt`` is the last answer's text; ``usage`` what the run used."""

    code = "output_invalid"
    attempt: str
    retries: int
    usage: dict[str, int]


class InvalidMessage(AmbitError, ValueError):
    """A message history given as a run's input breaks a rule (an unknown role, a field of the wrong
    type, a tool result that answers no call): ``index`` is the message's place in the list, ``field``
    the field that is wrong (``role``, ``call_id``, ``tool_calls[0].id``; empty for the whole entry).
    Nothing was sent or stored."""

    code = "invalid_message"
    index: int = 0
    field: str = ""


class HookFailed(AmbitError):
    """A hook or guardrail raised (or answered what its point does not take): ``hook`` is its name,
    ``point`` where it ran (``before_tool_call``, …, ``input_guardrail``, ``output_guardrail``). The run
    ended there; a session stores nothing of it."""

    code = "hook_failed"
    hook: str = ""
    point: str = ""


class GuardrailTripped(AmbitError):
    """A guardrail tripped: ``guardrail`` is its name, ``kind`` ``"input"`` or ``"output"``, ``verdict``
    the ``info`` its :class:`ambit.GuardrailVerdict` gave (any JSON value). No tool ran after a tripped
    input guardrail, and no answer was returned. ``usage`` is what the run used."""

    code = "guardrail_tripped"
    guardrail: str = ""
    kind: str = ""
    verdict: Any = None
    usage: dict[str, int]


class RunCancelled(AmbitError):
    """The run was cancelled."""

    code = "cancelled"


class InternalError(AmbitError):
    """A bug in ambit: a panic in the native core was caught at the boundary instead of taking the
    process down. The message is the panic's; please report it."""

    code = "internal"


class AwaitingApproval(AmbitError):
    """A session run parked: a call waits on an approval answered later. A signal, not a failure:
    ``Sessions.resume(agent, session_id, decision)`` — from any process and language — continues it.
    ``session_id`` and ``request`` (the ApprovalRequest's fields) say what waits."""

    session_id: str
    request: dict[str, Any]


class SessionBusy(AmbitError):
    """Another run holds the session: one run at a time per session, across processes. A run whose
    process died holds it until its lease runs out; then the next run takes it over."""

    code = "session_busy"


class SessionNotParked(AmbitError):
    """``resume`` of a session with no approval waiting: never parked, already resumed, or claimed first
    by another resume (exactly one resume of a parked approval runs)."""

    code = "session_not_parked"


_BY_CODE: dict[str, type[AmbitError]] = {
    "awaiting_approval": AwaitingApproval,
    "session_busy": SessionBusy,
    "session_not_parked": SessionNotParked,
    "config": ConfigError,
    "model_http": ModelError,
    "model_transport": ModelError,
    "model_response": ModelError,
    "max_turns": MaxTurnsExceeded,
    "budget_exceeded": BudgetExceeded,
    "output_truncated": OutputTruncated,
    "output_invalid": OutputInvalid,
    "invalid_message": InvalidMessage,
    "hook_failed": HookFailed,
    "guardrail_tripped": GuardrailTripped,
    "cancelled": RunCancelled,
    "internal": InternalError,
}


def _from_core(code: str, message: str, details: dict[str, Any]) -> AmbitError:
    """Called by the native module to turn a core error into its exception."""
    exc = _BY_CODE.get(code, AmbitError)(message, code=code)
    if "status" in details:
        exc.status = details["status"]  # type: ignore[attr-defined]
    if "max_turns" in details:
        exc.max_turns = details["max_turns"]  # type: ignore[attr-defined]
    for key in ("budget", "limit", "spent", "cost"):
        if key in details:
            setattr(exc, key, details[key])
    if "index" in details:
        exc.index = details["index"]  # type: ignore[attr-defined]
        exc.field = details["field"]  # type: ignore[attr-defined]
    if "tools" in details:
        exc.tools = list(details["tools"])  # type: ignore[attr-defined]
    for key in ("attempt", "retries"):
        if key in details:
            setattr(exc, key, details[key])
    for key in ("hook", "point", "guardrail", "kind"):
        if key in details:
            setattr(exc, key, details[key])
    if "verdict" in details:
        exc.verdict = json.loads(details["verdict"])  # type: ignore[attr-defined]
    if "usage" in details:
        exc.usage = json.loads(details["usage"])  # type: ignore[attr-defined]
    if "session_id" in details:
        exc.session_id = details["session_id"]  # type: ignore[attr-defined]
    if "request" in details:
        exc.request = json.loads(details["request"])  # type: ignore[attr-defined]
    return exc
