"""Checks ambit's side of each wire against something we did not write: the official `openai` and
`anthropic` Python packages. Every request body ambit sent (as the loopback provider recorded it) must
validate as the package's request parameters, and every answer the provider scripted must parse with
the package's response models, without fields the package does not know."""

from __future__ import annotations

import typing
from typing import Any

import anthropic.types as anthropic_types
import openai.types.chat as chat_types
import openai.types.responses as responses_types
from openai.types.responses import response_create_params
from pydantic import BaseModel, TypeAdapter

REQUEST_TYPES: dict[tuple[str, bool], Any] = {
    ("openai_chat", False): chat_types.completion_create_params.CompletionCreateParamsNonStreaming,
    ("openai_chat", True): chat_types.completion_create_params.CompletionCreateParamsStreaming,
    ("anthropic", False): anthropic_types.message_create_params.MessageCreateParamsNonStreaming,
    ("anthropic", True): anthropic_types.message_create_params.MessageCreateParamsStreaming,
    ("openai_responses", False): response_create_params.ResponseCreateParamsNonStreaming,
    ("openai_responses", True): response_create_params.ResponseCreateParamsStreaming,
}

RESPONSE_MODELS: dict[str, Any] = {
    "openai_chat": chat_types.ChatCompletion,
    "anthropic": anthropic_types.Message,
    "openai_responses": responses_types.Response,
}

EVENT_TYPES: dict[str, Any] = {
    "openai_chat": chat_types.ChatCompletionChunk,
    "anthropic": anthropic_types.RawMessageStreamEvent,
    "openai_responses": responses_types.ResponseStreamEvent,
}

_adapters: dict[Any, TypeAdapter[Any]] = {}


def _adapter(t: Any) -> TypeAdapter[Any]:
    if t not in _adapters:
        _adapters[t] = TypeAdapter(t)
    return _adapters[t]


def _force(value: Any) -> Any:
    """Consumes the lazy iterators pydantic makes for `Iterable[...]` fields, so their items are
    validated too."""
    if isinstance(value, dict):
        return {k: _force(v) for k, v in value.items()}
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return value
    if isinstance(value, BaseModel):
        return value
    try:
        return [_force(v) for v in value]
    except TypeError:
        return value


def _unknown_request_keys(t: Any, body: dict[str, Any]) -> list[str]:
    known = set(typing.get_type_hints(t, include_extras=False))
    return sorted(set(body) - known)


def _extras(model: Any, path: str) -> list[str]:
    """Fields a response carried that the package's model does not know."""
    found: list[str] = []
    if isinstance(model, BaseModel):
        for k in (model.model_extra or {}):
            found.append(f"{path}.{k}")
        for name in type(model).model_fields:
            found += _extras(getattr(model, name), f"{path}.{name}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            found += _extras(item, f"{path}[{i}]")
    elif isinstance(model, dict):
        for k, v in model.items():
            found += _extras(v, f"{path}.{k}")
    return found


def validate_request(wire: str, body: dict[str, Any]) -> None:
    stream = bool(body.get("stream"))
    t = REQUEST_TYPES[(wire, stream)]
    _force(_adapter(t).validate_python(body))
    unknown = _unknown_request_keys(t, body)
    assert not unknown, f"{wire} request has keys the official package does not know: {unknown}"


def validate_response(wire: str, answer: dict[str, Any]) -> None:
    if answer["status"] != 200:
        if wire == "anthropic":
            anthropic_types.ErrorResponse.model_validate(answer["body"])
        else:
            assert set(answer["body"]["error"]) >= {"message", "type", "param", "code"}, answer
        return
    if "events" not in answer:
        parsed = RESPONSE_MODELS[wire].model_validate(answer["body"])
        extras = _extras(parsed, "$")
        assert not extras, f"{wire} answer has fields the official package does not know: {extras}"
        return
    for event in answer["events"]:
        data = event["data"]
        if wire == "anthropic" and event["event"] == "ping":
            # The API sends pings; the package's stream reader skips them and has no model for them.
            assert data == {"type": "ping"}, event
            continue
        t = EVENT_TYPES[wire]
        parsed = t.model_validate(data) if isinstance(t, type) and issubclass(t, BaseModel) else _adapter(t).validate_python(data)
        if wire != "openai_chat":
            assert event["event"] == data["type"], event
        extras = _extras(parsed, f"${event['event'] or ''}")
        assert not extras, f"{wire} event has fields the official package does not know: {extras}"


def validate_exchanges(state: dict[str, Any]) -> int:
    """Validates every recorded request and answer; returns how many requests were checked."""
    wire = state["wire"]
    for i, request in enumerate(state["requests"]):
        try:
            validate_request(wire, request["body"])
        except Exception as e:  # noqa: BLE001 - name the request in the failure
            raise AssertionError(f"{state['scenario']} request {i + 1}: {e}") from e
    for i, answer in enumerate(state["responses"]):
        try:
            validate_response(wire, answer)
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"{state['scenario']} answer {i + 1}: {e}") from e
    return len(state["requests"])
