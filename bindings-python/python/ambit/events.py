"""The events of a run, as ``agent.stream(...)`` yields them, in the order they happened."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Union

if TYPE_CHECKING:
    from . import RunResult, StopReason, Usage
    from .policy import ApprovalRequest

__all__ = [
    "AgentEvent", "ApprovalRequested", "BackgroundTaskProgress", "BackgroundTaskReported", "BackgroundTaskStarted", "ChecklistNudge", "Event", "GuardrailChecked", "ModelRequest", "ModelResponse", "RunFinished", "RunStarted", "TextDelta",
    "ToolCallRequested", "ToolFinished", "ToolRefused", "ToolStarted",
]


@dataclass(frozen=True)
class Event:
    """Any event; ``type`` is its name (``run_started``, ``text_delta``, …). An event type this version
    does not know arrives as a plain ``Event`` with its fields in ``data``."""

    type: str
    data: dict[str, Any]


@dataclass(frozen=True)
class RunStarted:
    type: ClassVar[str] = "run_started"
    input: str


@dataclass(frozen=True)
class ModelRequest:
    """A model request is about to be sent; ``turn`` counts from 1."""

    type: ClassVar[str] = "model_request"
    turn: int


@dataclass(frozen=True)
class TextDelta:
    """A piece of the model's text as it streams (the whole text at once on an unstreamed wire)."""

    type: ClassVar[str] = "text_delta"
    text: str


@dataclass(frozen=True)
class ModelResponse:
    """The model answered; ``usage`` is this request's, ``cost`` its cost when the agent's price table
    has the model, ``stop_reason`` why the model stopped (``"length"``: cut by the output token limit)."""

    type: ClassVar[str] = "model_response"
    turn: int
    usage: Usage
    cost: float | None = None
    stop_reason: StopReason = "end"


@dataclass(frozen=True)
class ToolCallRequested:
    """The model asked for a tool call; ``from_text``: the call was read from the answer's text (the
    model's ``text_tool_calls`` setting), not sent as a call by the server."""

    type: ClassVar[str] = "tool_call_requested"
    id: str
    name: str
    arguments: Any
    from_text: bool = False


@dataclass(frozen=True)
class ToolStarted:
    type: ClassVar[str] = "tool_started"
    id: str
    name: str


@dataclass(frozen=True)
class ToolFinished:
    """The call ended; ``result`` is what the model sees."""

    type: ClassVar[str] = "tool_finished"
    id: str
    name: str
    result: str
    is_error: bool


@dataclass(frozen=True)
class ToolRefused:
    """The call was refused before the tool ran; ``reason`` is what the model sees."""

    type: ClassVar[str] = "tool_refused"
    id: str
    name: str
    reason: str


@dataclass(frozen=True)
class ApprovalRequested:
    """A call was put to the approval handler (the handler's answer follows as the call's events)."""

    type: ClassVar[str] = "approval_requested"
    request: ApprovalRequest


@dataclass(frozen=True)
class BackgroundTaskStarted:
    """A call went to the background as task ``task_id``."""

    type: ClassVar[str] = "background_task_started"
    task_id: str
    call_id: str
    name: str


@dataclass(frozen=True)
class BackgroundTaskProgress:
    type: ClassVar[str] = "background_task_progress"
    task_id: str
    note: str


@dataclass(frozen=True)
class BackgroundTaskReported:
    """A background task's result reached the model as its own turn."""

    type: ClassVar[str] = "background_task_reported"
    task_id: str
    name: str
    result: str
    is_error: bool


@dataclass(frozen=True)
class ChecklistNudge:
    type: ClassVar[str] = "checklist_nudge"
    nudge: int
    open_items: list[str]


@dataclass(frozen=True)
class GuardrailChecked:
    """A guardrail gave its verdict (``kind``: ``input`` or ``output``); a tripped one ends the run with
    :class:`ambit.GuardrailTripped`."""

    type: ClassVar[str] = "guardrail_checked"
    guardrail: str
    kind: str
    tripped: bool
    info: Any


@dataclass(frozen=True)
class RunFinished:
    """The last event of a run that did not fail."""

    type: ClassVar[str] = "run_finished"
    usage: Usage
    result: RunResult


AgentEvent = Union[
    RunStarted, ModelRequest, TextDelta, ModelResponse, ToolCallRequested, ToolStarted, ToolFinished,
    ToolRefused, ApprovalRequested, BackgroundTaskStarted, BackgroundTaskProgress, BackgroundTaskReported,
    ChecklistNudge, GuardrailChecked, RunFinished, Event,
]
"""Every event ``agent.stream(...)`` yields: narrow it with ``isinstance`` or ``match``. A type this version
does not know arrives as the plain :class:`Event`."""
