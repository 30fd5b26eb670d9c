"""Models for testing your own agents: :class:`TestModel` answers from a script, :class:`FunctionModel`
with a function of each request. Neither reaches a network, yet both speak a real wire: the core writes
each request as that wire's body and reads each reply back through the same decoder a hosted model's
answer goes through, so a test on them exercises ambit's real decoding (streamed or not)::

    model = ambit.TestModel([
        ambit.Reply.tool_call("get_weather", {"city": "Paris"}),
        "Sunny in Paris.",                       # a plain string is a text reply
    ])
    agent = ambit.Agent(model=model, tools=[get_weather])
    result = await agent.run("Weather in Paris?")
    assert result.output == "Sunny in Paris."

A request past the script, or a function that raises, fails the run with :class:`ambit.ModelError`
(code ``model_response``) naming it."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from .errors import ConfigError
from .models import Model

__all__ = ["FunctionModel", "Reply", "ReplyCall", "TestModel", "TestRequest", "Wire"]

#: The wire a test model speaks.
Wire = Literal["openai_chat", "anthropic", "openai_responses"]

_WIRES = ("openai_chat", "anthropic", "openai_responses")


@dataclass(frozen=True)
class ReplyCall:
    """A tool call in a :class:`Reply`: the tool's name, its arguments (a JSON object) and, optionally, the
    call's id (default ``call_<request>_<index>``)."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One answer of a test model: text, tool calls, or both, and the token counts to report."""

    content: str | None = None
    tool_calls: Sequence[ReplyCall] = ()
    input_tokens: int = 0
    output_tokens: int = 0

    @staticmethod
    def text(text: str) -> Reply:
        """A text answer."""
        return Reply(content=text)

    @staticmethod
    def tool_call(name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None) -> Reply:
        """An answer asking for one tool call."""
        return Reply(tool_calls=(ReplyCall(name, dict(arguments or {}), id),))

    def _config(self) -> dict[str, Any]:
        calls = []
        for c in self.tool_calls:
            if not isinstance(c, ReplyCall):
                raise TypeError(f"tool_calls must hold ambit.ReplyCall, got {type(c).__name__}")
            call: dict[str, Any] = {"name": c.name, "arguments": c.arguments}
            if c.id is not None:
                call["id"] = c.id
            calls.append(call)
        config: dict[str, Any] = {"tool_calls": calls,
                                  "usage": {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}}
        if self.content is not None:
            config["content"] = self.content
        return config


#: What a script entry or a function may give: a :class:`Reply`, or a string (a text reply).
ReplyLike = Union[Reply, str]


def _reply_config(reply: Any) -> dict[str, Any]:
    if isinstance(reply, str):
        return Reply.text(reply)._config()
    if isinstance(reply, Reply):
        return reply._config()
    raise TypeError(f"a test model reply must be an ambit.Reply or a string, got {type(reply).__name__}")


@dataclass(frozen=True)
class TestRequest:
    """What a :class:`FunctionModel` is asked: the request's number (from 1), the wire and model name, the
    system prompt, the conversation so far (provider-neutral messages: ``role`` ``user``,
    ``assistant`` with ``tool_calls``, ``tool`` with ``call_id``), the tools offered, and ``body``: the
    wire's request body as a hosted model would get it."""

    __test__ = False  # not a pytest test class

    index: int
    wire: str
    model: str
    instructions: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    body: dict[str, Any]

    @property
    def last_user_message(self) -> str | None:
        """The text of the last user message, if any."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return str(m.get("content"))
        return None


def _check_wire(wire: str) -> None:
    if wire not in _WIRES:
        raise ConfigError(f"wire must be one of {', '.join(_WIRES)}, got {wire!r}")


@dataclass(frozen=True, init=False)
class TestModel(Model):
    """A model answering from a script: the n-th request gets the n-th reply (a :class:`Reply` or a
    string). ``wire`` (default ``openai_chat``) is the wire it speaks, ``stream`` streams its answers as
    server-sent events, ``model`` is the name it reports."""

    __test__ = False  # not a pytest test class

    replies: tuple[ReplyLike, ...] = ()

    def __init__(self, replies: Sequence[ReplyLike], *, wire: Wire = "openai_chat", model: str = "test-model",
                 stream: bool = False) -> None:
        _check_wire(wire)
        if isinstance(replies, (str, Reply)) or not isinstance(replies, Sequence):
            raise TypeError(f"replies must be a list of ambit.Reply or strings, got {type(replies).__name__}")
        super().__init__(model, stream=stream)
        object.__setattr__(self, "replies", tuple(replies))
        object.__setattr__(self, "wire", wire)
        self._config()  # a bad reply is refused here, naming it

    def _config(self) -> dict[str, Any]:
        return {"test_model": {"wire": self.wire, "model": self.model, "stream": self.stream,
                               "replies": [_reply_config(r) for r in self.replies]}}


#: A function a :class:`FunctionModel` answers with: plain or async, from a :class:`TestRequest` to a
#: :class:`Reply` or a string.
ReplyFunction = Callable[[TestRequest], Union[ReplyLike, Awaitable[ReplyLike]]]


@dataclass(frozen=True, init=False)
class FunctionModel(Model):
    """A model answering with ``function(request)`` (plain or async) for each :class:`TestRequest`; an
    exception it raises fails the run (:class:`ambit.ModelError`, naming it)."""

    function: ReplyFunction | None = field(default=None, repr=False)

    def __init__(self, function: ReplyFunction, *, wire: Wire = "openai_chat", model: str = "test-model",
                 stream: bool = False) -> None:
        _check_wire(wire)
        if not callable(function):
            raise TypeError(f"function must be callable, got {type(function).__name__}")
        super().__init__(model, stream=stream)
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "wire", wire)

    def _config(self) -> dict[str, Any]:
        return {"test_model": {"wire": self.wire, "model": self.model, "stream": self.stream}}

    def _native_function(self) -> tuple[Callable[..., Any], bool] | None:
        fn = self.function
        assert fn is not None
        if inspect.iscoroutinefunction(fn):
            async def call_async(arg: str, _token: int) -> str:
                reply = await fn(_request(arg))
                return json.dumps(_reply_config(reply))
            return call_async, True

        def call(arg: str, _token: int) -> str:
            reply = fn(_request(arg))
            if inspect.isawaitable(reply):
                raise TypeError("a plain function returned an awaitable; make the function async")
            return json.dumps(_reply_config(reply))
        return call, False


def _request(arg: str) -> TestRequest:
    raw = json.loads(arg)
    if isinstance(raw, list):
        # Called as a tool is: `[request, credentials, context]`.
        raw = raw[0]
    return TestRequest(index=raw["index"], wire=raw["wire"], model=raw["model"], instructions=raw["instructions"],
                       messages=raw["messages"], tools=raw["tools"], body=raw["body"])
