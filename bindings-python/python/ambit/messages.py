"""A conversation as ambit keeps it, the same in every language: the provider-neutral messages a run
returns in ``result.messages`` and takes back as its input (``await agent.run([...])``), so a host can
keep its own history. Each class is the core's JSON form (``to_dict``/``message_from_dict``), which
Node and Swift read and write too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, Union

__all__ = ["AssistantMessage", "AssistantToolCall", "Message", "ProviderMessage", "ToolResultMessage",
           "UserMessage", "message_from_dict", "message_to_dict"]


@dataclass(frozen=True)
class UserMessage:
    """What the user said."""

    content: str
    #: The message's parts when it has images or files (the core's JSON form of each; ``content`` is
    #: then their text view): kept so a history sent back carries them.
    parts: list[dict[str, Any]] = field(default_factory=list)
    role: ClassVar[Literal["user"]] = "user"


@dataclass(frozen=True)
class AssistantToolCall:
    """A tool call the model asked for: ``arguments`` is the JSON text it wrote."""

    id: str
    name: str
    arguments: str
    #: Read from the answer's text rather than sent as a call (the ``text_tool_calls`` setting).
    from_text: bool = False


@dataclass(frozen=True)
class AssistantMessage:
    """The model's answer: its text (``None`` when it only called tools) and the calls it asked for. Each
    call's :class:`ToolResultMessage` follows it before the next user or assistant message."""

    content: str | None = None
    tool_calls: list[AssistantToolCall] = field(default_factory=list)
    role: ClassVar[Literal["assistant"]] = "assistant"


@dataclass(frozen=True)
class ToolResultMessage:
    """The result of the call ``call_id`` of an earlier assistant message."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    #: The result's parts when the tool returned images (as :attr:`UserMessage.parts`).
    parts: list[dict[str, Any]] = field(default_factory=list)
    role: ClassVar[Literal["tool"]] = "tool"


@dataclass(frozen=True)
class ProviderMessage:
    """Items the provider produced and answered itself (its own tool search), kept verbatim for the
    wire named by ``wire``; pass them back as they came."""

    wire: str
    items: list[Any] = field(default_factory=list)
    role: ClassVar[Literal["provider"]] = "provider"


#: One entry of a conversation.
Message = Union[UserMessage, AssistantMessage, ToolResultMessage, ProviderMessage]


def message_to_dict(message: Message | Mapping[str, Any]) -> dict[str, Any]:
    """The core's JSON form of ``message``; a mapping is taken as that form already (the core checks it)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content, **({"parts": message.parts} if message.parts else {})}
    if isinstance(message, AssistantMessage):
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments, **({"from_text": True} if c.from_text else {})}
                 for c in message.tool_calls]
        return {"role": "assistant", "content": message.content, "tool_calls": calls}
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "call_id": message.call_id, "name": message.name, "content": message.content,
                "is_error": message.is_error, **({"parts": message.parts} if message.parts else {})}
    if isinstance(message, ProviderMessage):
        return {"role": "provider", "wire": message.wire, "items": list(message.items)}
    if isinstance(message, Mapping):
        return dict(message)
    raise TypeError(f"a message is an ambit message (UserMessage, AssistantMessage, ToolResultMessage, "
                    f"ProviderMessage) or its dict form, got {type(message).__name__}")


def message_from_dict(raw: Mapping[str, Any]) -> Message:
    """The message of the core's JSON form (as ``result.messages`` holds them)."""
    role = raw["role"]
    if role == "user":
        return UserMessage(raw["content"], list(raw.get("parts") or []))
    if role == "assistant":
        calls = [AssistantToolCall(c["id"], c["name"], c["arguments"], bool(c.get("from_text", False)))
                 for c in raw.get("tool_calls") or []]
        return AssistantMessage(raw.get("content"), calls)
    if role == "tool":
        return ToolResultMessage(raw["call_id"], raw["name"], raw["content"], bool(raw.get("is_error", False)),
                                 list(raw.get("parts") or []))
    if role == "provider":
        return ProviderMessage(raw["wire"], list(raw.get("items", [])))
    raise ValueError(f"unknown message role {role!r}")
