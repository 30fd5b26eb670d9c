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
import atexit
import inspect
import json
import typing
from dataclasses import asdict, dataclass, field
import itertools
import threading
from typing import Any, AsyncGenerator, Callable, Generic, Iterable, Literal, Mapping, Sequence, TypeVar, Union, overload

from . import _native
from .credentials import Credentials
from ._options import items, mapping, strings
from ._schema import decode, function_schema, is_pydantic_model, type_schema
from . import events
from .errors import (AmbitError, AwaitingApproval, BudgetExceeded, ConfigError, InternalError, InvalidMessage,
                     MaxTurnsExceeded, ModelError, OutputInvalid, OutputTruncated, RunCancelled, SessionBusy, SessionNotParked)
from .events import Event
from .models import Anthropic, Model, OpenAIChat, OpenAIResponses, TextToolCalls, ToolChoice
from .policy import Approve, ApprovalRequest, Deny, Later, Level, Policy, Revise, ToolListing
from .mcp import Deferral, ElicitationAnswer, ElicitationRequest, McpServer, OAuth, TokenStore
from .subagents import NamedAgent, Subagents, subagents_config
from .session import SESSION_TOOLS, Deliveries, Delivery, Sessions, TaskSnapshot
from . import telemetry

if typing.TYPE_CHECKING:
    from . import knowledge, ledger, memory, routines, skills, testmodel
    from .knowledge import Knowledge
    from .ledger import Ledger, LedgerError, RoutineLedger
    from .memory import Memory
    from .routines import Routines, Runner, RunContext
    from .skills import Skills
    from .testmodel import FunctionModel, Reply, ReplyCall, TestModel, TestRequest

# Imported when first used (PEP 562): a program that never touches the ledger, routines, memory, skills,
# knowledge or the test models does not pay for defining them at start-up (about a third of `import ambit`).
_LAZY: dict[str, tuple[str, str | None]] = {
    **{m: (m, None) for m in ("knowledge", "ledger", "memory", "routines", "skills", "testmodel")},
    "Knowledge": ("knowledge", "Knowledge"),
    "Ledger": ("ledger", "Ledger"), "LedgerError": ("ledger", "LedgerError"),
    "RoutineLedger": ("ledger", "RoutineLedger"),
    "Memory": ("memory", "Memory"),
    "Routines": ("routines", "Routines"), "Runner": ("routines", "Runner"), "RunContext": ("routines", "RunContext"),
    "Skills": ("skills", "Skills"),
    **{n: ("testmodel", n) for n in ("FunctionModel", "Reply", "ReplyCall", "TestModel", "TestRequest")},
}


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'ambit' has no attribute {name!r}") from None
    import importlib
    value = importlib.import_module(f".{module}", __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value
from . import hooks
from .hooks import Guardrail, GuardrailVerdict, Hook, HookContext, HookPoint, HookResult, Refuse, Replace
from .errors import GuardrailTripped, HookFailed
from . import content
from .content import File, Image, Text
from . import messages
from .messages import (AssistantMessage, AssistantToolCall, Message, ProviderMessage, ToolResultMessage, UserMessage,
                       message_from_dict, message_to_dict)

__all__ = [
    "Agent",
    "File",
    "Image",
    "Text",
    "content",
    "Guardrail",
    "GuardrailTripped",
    "GuardrailVerdict",
    "Hook",
    "HookContext",
    "HookFailed",
    "HookPoint",
    "HookResult",
    "Refuse",
    "Replace",
    "hooks",
    "AssistantMessage",
    "AssistantToolCall",
    "InvalidMessage",
    "Message",
    "ProviderMessage",
    "ToolResultMessage",
    "UserMessage",
    "messages",
    "FunctionModel",
    "Reply",
    "ReplyCall",
    "TestModel",
    "TestRequest",
    "testmodel",
    "Credentials",
    "ToolContext",
    "Subagents",
    "NamedAgent",
    "Later",
    "AwaitingApproval",
    "SessionBusy",
    "SessionNotParked",
    "Sessions",
    "Deliveries",
    "Delivery",
    "TaskSnapshot",
    "SESSION_TOOLS",
    "Ledger",
    "LedgerError",
    "ledger",
    "Memory",
    "memory",
    "telemetry",
    "Skills",
    "skills",
    "Knowledge",
    "knowledge",
    "Routines",
    "Runner",
    "RunContext",
    "routines",
    "AmbitError",
    "Anthropic",
    "BudgetExceeded",
    "ChecklistItem",
    "Event",
    "Model",
    "OpenAIResponses",
    "Price",
    "events",
    "ApprovalRequest",
    "Approve",
    "Deny",
    "Policy",
    "Revise",
    "ToolListing",
    "ConfigError",
    "InternalError",
    "Deferral",
    "McpServer",
    "OAuth",
    "TokenStore",
    "ElicitationRequest",
    "ElicitationAnswer",
    "MaxTurnsExceeded",
    "ModelError",
    "OpenAIChat",
    "OutputTruncated",
    "OutputInvalid",
    "OutputSchema",
    "RunCancelled",
    "RunResult",
    "StopReason",
    "TaskContext",
    "Tool",
    "ToolCall",
    "TextToolCalls",
    "ToolChoice",
    "Usage",
    "tool",
    "wire_name",
]

__version__: str = _native.__version__

# wire_name(name, max_bytes=64) -> str: the name the model sees for a tool on a wire that takes names of
# at most max_bytes bytes (64 on Chat Completions, 128 on Anthropic and Responses). Straight from the core.
wire_name = _native.wire_name

# No native worker may still be inside Python when the interpreter finalizes.
atexit.register(_native._drain)


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


#: Why the model stopped answering: it ended (``end``), asked for tool calls, was cut by the output
#: token limit (``length``), by the provider's content filter, refused, or another reason.
StopReason = Literal["end", "tool_calls", "length", "content_filter", "refusal", "other"]


@dataclass(frozen=True)
class RunResult:
    """What a finished run returns. ``stop_reason`` says why the model stopped its final answer:
    ``"length"`` when the output token limit cut it (``output`` is then the part it wrote)."""

    output: str
    tool_calls: list[ToolCall]
    usage: Usage
    turns: int
    #: The whole conversation, the input first, as typed messages (``ambit.messages``): pass it back,
    #: with a new :class:`UserMessage`, as the next run's input to continue it.
    messages: list[Message]
    stop_reason: StopReason = "end"
    #: What the run cost, when the agent's price table has the model.
    cost: float | None = None
    #: Checklist items still pending or in_progress when the run ended (past the nudge cap).
    open_items: list[ChecklistItem] = field(default_factory=list)
    #: The final answer as the agent's ``output_type`` (a Pydantic model, dataclass or TypedDict
    #: instance, or the JSON value for an :class:`OutputSchema`); ``None`` without one.
    structured_output: Any = None


@dataclass(frozen=True)
class OutputSchema:
    """A final answer's type given as a JSON Schema: ``name`` (1 to 64 letters, digits, ``_`` or ``-``)
    and ``schema`` (an object's). ``Agent(output_type=...)`` also takes a Pydantic model, a dataclass or a
    TypedDict, whose schema is derived."""

    name: str
    schema: Mapping[str, Any]


def _output_config(output_type: Any, retries: int | None) -> tuple[dict[str, Any], Callable[[Any], Any]]:
    """The core's ``output`` option for ``output_type``, and how its JSON becomes the type."""
    if isinstance(output_type, OutputSchema):
        if not isinstance(output_type.schema, Mapping):
            raise TypeError(f"OutputSchema.schema must be a mapping, got {type(output_type.schema).__name__}")
        config: dict[str, Any] = {"name": output_type.name, "schema": dict(output_type.schema)}
        decoder: Callable[[Any], Any] = lambda value: value  # noqa: E731
    elif isinstance(output_type, type):
        config = {"name": output_type.__name__, "schema": type_schema(output_type, "output_type")}
        if config["schema"].get("type") != "object":
            raise TypeError(f"output_type must be a Pydantic model, a dataclass or a TypedDict (an object), "
                            f"got {output_type.__name__}")
        decoder = lambda value: decode(output_type, value, "output")  # noqa: E731
    else:
        raise TypeError(f"output_type must be a Pydantic model, a dataclass, a TypedDict or an ambit.OutputSchema, "
                        f"got {output_type!r}")
    if retries is not None:
        config["retries"] = retries
    return config, decoder


@dataclass(frozen=True)
class ChecklistItem:
    """One item of a run's checklist; ``status`` is pending, in_progress, deferred, completed or canceled."""

    id: int
    text: str
    status: str
    reason: str | None = None
    task: str | None = None


@dataclass(frozen=True)
class Price:
    """What a model costs per million tokens, in any unit (the cost budget uses the same unit)."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0
    cache_read_per_mtok: float = 0.0
    cache_write_per_mtok: float = 0.0


class Tool:
    """A Python function the model can call. Make one with :func:`tool`."""

    __slots__ = ("fn", "name", "description", "parameters", "is_async", "level", "requires_approval", "allow_blank",
                 "idempotent", "credentials")

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 parameters: Mapping[str, Any] | None = None, level: Level | None = None,
                 requires_approval: bool = False, allow_blank: Iterable[str] = (), idempotent: bool = False,
                 credentials: Iterable[str] = ()) -> None:
        if not callable(fn):
            raise TypeError(f"a tool needs a function, got {fn!r}")
        self.fn = fn
        # A name given is the name, even blank (the core refuses a blank one by name); only no name at
        # all takes the function's.
        if name is not None and not isinstance(name, str):
            raise ConfigError(f"a tool's name must be a string, got {name!r}")
        self.name: str = name if name is not None else getattr(fn, "__name__", "")
        doc_description, schema = function_schema(fn, self.name) if parameters is None else ("", dict(parameters))
        self.description: str = description if description is not None else doc_description
        self.parameters: dict[str, Any] = schema
        self.is_async: bool = inspect.iscoroutinefunction(fn)
        #: The lowest level the tool may run at; ``None`` is undeclared, which means ``unrestricted``.
        self.level: Level | None = level
        self.requires_approval: bool = requires_approval
        self.allow_blank: list[str] = strings(f"tool '{self.name}': allow_blank", allow_blank)
        if not isinstance(idempotent, bool):
            raise ConfigError(f"tool '{self.name}': idempotent must be True or False, got {idempotent!r}")
        #: Running a call twice has the effect of running it once: a call a crash interrupted is run
        #: again on resume; any other tool's is reported to the model as of unknown outcome.
        self.idempotent: bool = idempotent
        #: The credential aliases the function reads from its context (``ctx.credential(alias)``).
        self.credentials: list[str] = strings(f"tool '{self.name}': credentials", credentials)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r})"

    def _native_entry(self) -> tuple[str, Callable[[str, int], Any], bool]:
        fn = self.fn
        task_param = _task_param(fn)

        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable forward references: the arguments go as the JSON gave them
            hints = {}
        name = self.name

        def kwargs(envelope: str, token: int) -> dict[str, Any]:
            # `[arguments, credentials]`: the arguments read by the core's argument rule already, here
            # only built into the parameters' types (dataclasses, Pydantic models, enums, times,
            # tuples); the credentials the tool declared, produced by the core's broker for this call.
            arguments, credentials, context = json.loads(envelope)
            args = {k: decode(hints.get(k, Any), v, f"tool '{name}', argument '{k}'")
                    for k, v in arguments.items()}
            if task_param is not None:
                args[task_param] = TaskContext(token, credentials, context)
            return args

        if self.is_async:
            async def call(arguments: str, token: int) -> str:
                return _to_text(await fn(**kwargs(arguments, token)))
        else:
            def call(arguments: str, token: int) -> str:  # type: ignore[misc]
                return _to_text(fn(**kwargs(arguments, token)))
        spec: dict[str, Any] = {"name": self.name, "description": self.description, "parameters": self.parameters,
                                "requires_approval": self.requires_approval, "allow_blank": self.allow_blank,
                                "idempotent": self.idempotent, "credentials": self.credentials}
        if self.level is not None:
            spec["level"] = self.level
        return (json.dumps(spec), call, self.is_async)


T = TypeVar("T")

#: The host values of the runs under way, by id: a run's ``context`` stays here, in Python; the core
#: carries only its id to the run's tools, so it is never serialized, sent to a model or stored.
_CONTEXTS: dict[int, Any] = {}
_CONTEXT_IDS = itertools.count(1)
_CONTEXTS_LOCK = threading.Lock()
_NO_CONTEXT = object()


def _enter_context(value: Any) -> int:
    """Keeps ``value`` for one run; its id (0: no context)."""
    if value is _NO_CONTEXT:
        return 0
    with _CONTEXTS_LOCK:
        key = next(_CONTEXT_IDS)
        _CONTEXTS[key] = value
    return key


def _leave_context(key: int) -> None:
    with _CONTEXTS_LOCK:
        _CONTEXTS.pop(key, None)


class TaskContext(Generic[T]):
    """What a tool call sees of its run: the run's ``context``, its credentials and the background task
    it runs in. Declare a parameter annotated ``ambit.ToolContext[YourType]`` (or ``ambit.TaskContext``)
    to receive it (it is left out of the schema the model sees).

    ``context`` is the value given to ``agent.run(..., context=...)`` (a database pool, the current
    user), typed as the annotation says. ``progress(note)`` reports a short note, which the run's events
    and ``task_list`` show and which is also the task's heartbeat; ``cancelled`` turns true when the task
    is asked to stop (``task_cancel``), so a long tool checks it at its checkpoints and unwinds. Outside
    the background, ``in_background`` is false, progress goes nowhere and ``cancelled`` stays false."""

    __slots__ = ("_token", "_credentials", "_context")

    def __init__(self, token: int, credentials: dict[str, str] | None = None, context: int = 0) -> None:
        self._token = token
        self._credentials = dict(credentials or {})
        self._context = context

    @property
    def context(self) -> T:
        """The run's host value (``agent.run(..., context=value)``). A run given none raises
        :class:`ConfigError`."""
        with _CONTEXTS_LOCK:
            value = _CONTEXTS.get(self._context, _NO_CONTEXT) if self._context else _NO_CONTEXT
        if value is _NO_CONTEXT:
            raise ConfigError("the run has no context: pass one with agent.run(..., context=value)")
        return typing.cast(T, value)

    def credential(self, alias: str) -> str:
        """The value of a credential the tool declared (``@ambit.tool(credentials=[...])``), produced
        for this call by the agent's :class:`Credentials`. Never put it in the result: the redactor
        would show the model ``[credential:alias]`` anyway."""
        try:
            return self._credentials[alias]
        except KeyError:
            declared = ", ".join(sorted(self._credentials))
            raise ConfigError(f"credential '{alias}' was not declared by the tool (declared: {declared})") from None

    @property
    def in_background(self) -> bool:
        return self._token != 0

    def progress(self, note: str) -> None:
        _native.task_progress(self._token, str(note))

    @property
    def cancelled(self) -> bool:
        return _native.task_cancelled(self._token)


def _ledger_tools(routine: RoutineLedger | None, run: RunContext | None = None) -> Any:
    """The native tools of ``Agent(ledger=..., routine=...)``."""
    tools = None
    if routine is not None:
        from .ledger import RoutineLedger
        if not isinstance(routine, RoutineLedger):
            raise TypeError(f"ledger must be the tools of a routine's run (ledger.for_routine(...)), "
                            f"got {type(routine).__name__}")
        tools = routine._native
    if run is not None:
        from .routines import RunContext
        if not isinstance(run, RunContext):
            raise TypeError(f"routine must be the RunContext an agent factory was given, got {type(run).__name__}")
        tools = run._tools if tools is None else tools.join(run._tools)
    return tools


def _is_function(value: Any) -> bool:
    return callable(value) and not isinstance(value, type)


def _as_tool(value: Any) -> Tool:
    if isinstance(value, Tool):
        return value
    if _is_function(value):
        return Tool(value)
    raise TypeError


def _instance(cls: type[Any]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, cls):
            raise TypeError
        return value
    return check


def _to_text(value: Any) -> str:
    # An Image (or a list of parts holding one): the core's content value, its images sent in the
    # wire's tool-result blocks.
    # The core's tag marks it as the typed return it is: a plain string never reads as content.
    parts = content.tool_content(value)
    if parts is not None:
        return _native.host_content_tag() + json.dumps(parts)
    return value if isinstance(value, str) else json.dumps(value)


def _task_param(fn: Callable[..., Any]) -> str | None:
    """The name of the parameter annotated ``TaskContext``, if any."""
    import typing
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = getattr(fn, "__annotations__", {})
    for name, hint in hints.items():
        if (typing.get_origin(hint) or hint) is TaskContext or hint in ("TaskContext", "ToolContext") or (
                isinstance(hint, str) and hint.startswith(("ToolContext[", "TaskContext["))):
            return name
    return None


#: The context a tool call gets (a parameter annotated with it): the run's ``context`` (``ToolContext[T]``),
#: its background task and its declared credentials. The same class as :class:`TaskContext`.
ToolContext = TaskContext

ToolLike = Union[Tool, Callable[..., Any]]


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, name: str | None = None, description: str | None = None,
         parameters: Mapping[str, Any] | None = None, level: Level | None = None, requires_approval: bool = False,
         allow_blank: Iterable[str] = (), idempotent: bool = False) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(fn: Callable[..., Any] | None = None, /, *, name: str | None = None, description: str | None = None,
         parameters: Mapping[str, Any] | None = None, level: Level | None = None, requires_approval: bool = False,
         allow_blank: Iterable[str] = (), idempotent: bool = False,
         credentials: Iterable[str] = ()) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Makes a tool from a plain or async function. The schema comes from the type hints and the
    description from the docstring (an ``Args:`` section describes the parameters), unless given.

    Use as ``@tool`` or ``@tool(name=..., description=..., parameters=..., level="read")``. ``level`` is
    the lowest permission level the tool may run at (undeclared: ``unrestricted``, since the SDK cannot
    know what a function does); ``requires_approval`` puts every call to the policy's approval handler;
    ``allow_blank`` names string parameters whose empty value is itself the value; ``idempotent`` declares
    that running a call twice has the effect of running it once, so a call a crash interrupted in a
    session is run again on resume instead of being reported as of unknown outcome. What the function
    returns reaches the model as text: a string as is, anything else as JSON. An exception it raises
    becomes an error result the model sees; the run goes on."""
    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, parameters=parameters, level=level,
                    requires_approval=requires_approval, allow_blank=allow_blank, idempotent=idempotent,
                    credentials=credentials)
    return wrap(fn) if fn is not None else wrap


class Agent:
    """An agent: a model, instructions and tools.

    ``await agent.run(input)`` drives the loop to the final answer; ``agent.run_sync(input)`` does the
    same outside asyncio."""

    def __init__(self, *, model: Model | str, instructions: str | None = None,
                 tools: Iterable[ToolLike] = (), max_turns: int | None = None, policy: Policy | None = None,
                 builtins: Iterable[str] = (), max_concurrency: int | None = None, max_tokens: int | None = None,
                 max_cost: float | None = None, prices: Mapping[str, Price] | None = None,
                 checklist: bool = False, checklist_nudge_cap: int | None = None, background: bool = False,
                 heartbeat: float | None = None, scratchpad: bool = False, vision: bool = False,
                 mcp: Iterable[McpServer] = (),
                 deferral: Deferral | None = None, subagents: Subagents | bool | None = None,
                 ledger: RoutineLedger | None = None, memory: Memory | None = None,
                 agent_name: str | None = None, output_type: Any = None, output_retries: int | None = None,
                 skills: Skills | None = None, knowledge: Knowledge | None = None,
                 routine: RunContext | None = None, credentials: Credentials | None = None,
                 profiles: Mapping[str, Model] | None = None,
                 agents: Mapping[str, NamedAgent] | None = None,
                 hooks: Iterable[Hook] = (), input_guardrails: Iterable[Guardrail] = (),
                 output_guardrails: Iterable[Guardrail] = ()) -> None:
        """``max_concurrency`` bounds the tool calls of one turn running at once (default 8);
        ``background`` adds an optional ``background`` parameter to every tool: such a call returns a
        task id at once and its result arrives as its own turn (``task_list``, ``task_cancel``); a task
        silent for ``heartbeat`` seconds (default 300) is failed as dead. ``scratchpad`` adds an optional
        ``scratchpad`` parameter that saves a call's output under a name instead of returning it, and
        the scratchpad tools. ``vision`` says the model takes images: it adds ``image_render``, which shows
        the model an image held as base64 or in a scratchpad entry. ``checklist`` gives the agent the checklist tools and holds a turn open while an item is pending
        or in_progress, nudging the model up to ``checklist_nudge_cap`` times (default 3);
        ``max_tokens`` and ``max_cost`` are hard budgets on a run (input, output and cache tokens
        together; cost by ``prices``, per model name), past which it raises :class:`BudgetExceeded`.
        ``mcp`` lists MCP servers (:class:`McpServer`), connected before the first model request;
        ``deferral`` (:class:`Deferral`) says which tools wait in the catalog for ``tool_load``;
        ``subagents`` (``True`` or :class:`Subagents`) adds the five agent tools; ``ledger``
        (``ledger.for_routine(scope, run_id=..., routine_id=...)``) adds the work ledger's four tools
        bound to that run of a routine. ``memory`` (an opened :class:`Memory`) with ``agent_name`` (the
        agent's namespace in it) adds the ``memory_*`` tools and the agent's baseline after the
        instructions on every request. ``skills`` (:class:`Skills`) adds the skills index after the
        instructions, ``skill_read`` and ``skill_search``, and when agent-managed ``skill_write``,
        ``skill_edit`` and ``skill_delete``. ``knowledge`` (:class:`Knowledge`) adds ``knowledge_list``
        and ``knowledge_read`` over its directory.
        ``output_type`` (a Pydantic model, a dataclass, a TypedDict or an
        :class:`OutputSchema`) makes the final answer JSON of that type, read into
        ``result.structured_output``: the provider's native structured output where the wire has it, a
        ``final_answer`` tool elsewhere; a wrong answer goes back to the model up to ``output_retries``
        times (default 2), then the run raises :class:`OutputInvalid`. ``routine`` (the :class:`RunContext` a :class:`Runner` hands an
        agent factory) adds the run's ``report_outcome``, ``list_my_routines`` and ``list_my_outcomes``.
        ``profiles`` (``{name: model}``, each model with its own settings) are what ``agent_spawn``'s
        ``profile`` may name: a sub-agent spawned on one runs on that model on every follow-up; a
        profile never widens its level, scope, network or tools. ``agents`` (``{name:
        NamedAgent(agent, description=...)}``) adds ``agent_list_named`` and ``agent_delegate``: the
        named agent runs with its own instructions, tools and model, inside this agent's reach.
        ``hooks`` (:class:`Hook`) run at their point of every run and may edit a request, a response, a
        call's arguments or result, or refuse a call; ``input_guardrails`` check the input beside the
        first model request and ``output_guardrails`` the final answer (:class:`Guardrail`); a tripped
        one raises :class:`GuardrailTripped`, a hook or guardrail that raises :class:`HookFailed`."""
        if isinstance(model, str):
            model = OpenAIChat(model)
        if not isinstance(model, Model):
            raise TypeError(f"model must be a model (OpenAIChat, Anthropic, OpenAIResponses, TestModel, "
                            f"FunctionModel) or a model name, "
                            f"got {type(model).__name__}")
        if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1):
            raise ConfigError(f"max_turns must be a positive integer, got {max_turns!r}")
        self.model = model
        self.instructions = instructions
        if policy is not None and not isinstance(policy, Policy):
            raise TypeError(f"policy must be an ambit.Policy, got {type(policy).__name__}")
        # One tool is a one-entry list; a string is not a tool.
        self.tools: list[Tool] = items("tools", tools, lambda t: isinstance(t, Tool) or _is_function(t), _as_tool,
                                       "a list of tools (or one tool)", "a tool or a function")
        builtin_names = strings("builtins", builtins)
        self.policy = policy
        options: dict[str, Any] = {}
        if max_concurrency is not None:
            options["max_concurrency"] = max_concurrency
        budget = {k: v for k, v in (("max_tokens", max_tokens), ("max_cost", max_cost)) if v is not None}
        if budget:
            options["budget"] = budget
        if checklist:
            options["checklist"] = True
        if checklist_nudge_cap is not None:
            options["checklist_nudge_cap"] = checklist_nudge_cap
        if background:
            options["background"] = True
        if heartbeat is not None:
            options["heartbeat_secs"] = heartbeat
        if scratchpad:
            options["scratchpad"] = True
        if vision:
            # The model takes images: the image_render tool.
            options["vision"] = True
        servers = items("mcp", mcp, lambda s: isinstance(s, McpServer), _instance(McpServer),
                        "a list of ambit.McpServer (or one)", "an ambit.McpServer")
        mcp_hooks: list[tuple[str, str, Callable[[str], str]]] = []
        if servers:
            options["mcp_servers"] = [s._config() for s in servers]
            mcp_hooks = [h for s in servers for h in s._hooks()]
        if deferral is not None:
            if not isinstance(deferral, Deferral):
                raise TypeError(f"deferral must be an ambit.Deferral, got {type(deferral).__name__}")
            options["deferral"] = deferral._config()
        if memory is not None or agent_name is not None:
            from .memory import Memory
            if not isinstance(memory, Memory):
                raise ConfigError(f"memory must be an ambit.Memory (with agent_name), got {type(memory).__name__}")
            if not isinstance(agent_name, str):
                raise ConfigError(f"agent_name must name the agent in its memory store, got {agent_name!r}")
            options["memory"] = {"url": memory.url, "agent": agent_name}
        if skills is not None:
            from .skills import Skills
            if not isinstance(skills, Skills):
                raise TypeError(f"skills must be an ambit.Skills, got {type(skills).__name__}")
            options["skills"] = skills._config()
        if knowledge is not None:
            from .knowledge import Knowledge
            if not isinstance(knowledge, Knowledge):
                raise TypeError(f"knowledge must be an ambit.Knowledge, got {type(knowledge).__name__}")
            options["knowledge"] = knowledge._config()
        sub = subagents_config(subagents)
        if sub is not None:
            options["subagents"] = sub
        self._decode_output: Callable[[Any], Any] | None = None
        if output_type is not None:
            options["output"], self._decode_output = _output_config(output_type, output_retries)
        elif output_retries is not None:
            raise ConfigError("output_retries needs an output_type")
        if prices is not None:
            table = mapping("prices", prices, lambda p: isinstance(p, (Price, Mapping)), "Price values")
            if table:
                options["prices"] = {name: (asdict(p) if isinstance(p, Price) else dict(p))
                                     for name, p in table.items()}
        callbacks: list[tuple[str, Callable[[str], Any], bool]] = []
        if credentials is not None:
            if not isinstance(credentials, Credentials):
                raise TypeError(f"credentials must be an ambit.Credentials, got {type(credentials).__name__}")
            options["credentials"] = credentials._config()
            callbacks = list(credentials._callbacks)
        hook_list = items("hooks", hooks, lambda h: isinstance(h, Hook), _instance(Hook),
                          "a list of ambit.Hook (or one)", "an ambit.Hook")
        guardrails = [g._native_entry(kind)
                      for kind, given in (("input", input_guardrails), ("output", output_guardrails))
                      for g in items(f"{kind}_guardrails", given, lambda g: isinstance(g, Guardrail),
                                     _instance(Guardrail), "a list of ambit.Guardrail (or one)",
                                     "an ambit.Guardrail")]
        profile_entries: list[tuple[str, str, tuple[Callable[[str, int], Any], bool] | None]] = []
        for name, m in mapping("profiles", profiles or {}, lambda m: isinstance(m, Model),
                               "a model (OpenAIChat, Anthropic, OpenAIResponses, TestModel or FunctionModel)").items():
            profile_entries.append((name, m._config_json(), m._native_function()))
        named_entries: list[tuple[str, str, _native.NativeAgent]] = []
        for name, n in mapping("agents", agents or {}, lambda n: isinstance(n, NamedAgent),
                               "ambit.NamedAgent values").items():
            if not isinstance(n.agent, Agent):
                raise ConfigError(f"agents[{name!r}].agent must be an ambit.Agent, got {type(n.agent).__name__}")
            if not isinstance(n.description, str):
                raise ConfigError(f"agents[{name!r}].description must be a string, "
                                f"got {type(n.description).__name__}")
            named_entries.append((name, n.description, n.agent._native))
        self._native: _native.NativeAgent = _native.NativeAgent(
            model._config_json(), [t._native_entry() for t in self.tools],
            instructions=instructions, max_turns=max_turns, options=json.dumps(options),
            policy=policy._config_json() if policy else None,
            approvals=policy._native_approvals() if policy else None,
            builtins=builtin_names, ledger_tools=_ledger_tools(ledger, routine),
            model_function=model._native_function(), credential_callbacks=callbacks,
            mcp_hooks=mcp_hooks,
            profiles=profile_entries, named_agents=named_entries,
            hooks=[h._native_entry() for h in hook_list], guardrails=guardrails)

    def with_policy(self, policy: Policy) -> Agent:
        """The same agent under another policy, keeping its sub-agents (and its model, instructions,
        tools, MCP servers and settings). A sub-agent spawned before is re-admitted against the new
        policy's reach when it is followed up: a level dropped to narrows it (its report says
        ``Permission: read``), a directory no longer held refuses the follow-up. This agent is unchanged::

            agent = Agent(model=model, policy=Policy(level="workspace"), subagents=True)
            await agent.run("spawn a helper")
            narrowed = agent.with_policy(Policy(level="read"))
            await narrowed.run("follow up with the helper")   # the helper now runs at read
        """
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be an ambit.Policy, got {type(policy).__name__}")
        native = self._native.with_policy(policy._config_json(), policy._native_approvals())
        out = object.__new__(Agent)
        out.__dict__.update(self.__dict__)
        out.tools = list(self.tools)
        out.policy = policy
        out._native = native
        return out

    def list_tools(self) -> list[ToolListing]:
        """Every tool with its effective level and status: ``offered``, ``blocked`` (filtered out),
        ``above_level``, ``deferred`` (offered once loaded), ``hidden`` (by the deferral setting) or
        ``no_network`` (needs the network, withheld at network ``none``);
        ``approval`` says whether its calls go to the approval handler. MCP tools appear once their
        server was listed (before a run's first model request)."""
        return [ToolListing(**t) for t in json.loads(self._native.list_tools())]

    async def refresh_tools(self) -> None:
        """Connects the MCP servers not yet connected and re-lists those that changed, as a run does
        before each model request; :meth:`list_tools` then shows their tools. A server that fails is
        reported unavailable (to the model, in the catalog), not raised."""
        await self._native.refresh_tools()

    def refresh_tools_sync(self) -> None:
        """:meth:`refresh_tools` for code outside asyncio."""
        from ._aio import sync
        sync("refresh_tools", self.refresh_tools)

    async def run(self, input: str | Sequence[Message | Mapping[str, Any]] | Sequence[content.Part | str], *, context: Any = _NO_CONTEXT) -> RunResult:
        """Runs the loop from its input to the final answer. ``input`` is one user message, or a
        conversation the host keeps (typed :mod:`ambit.messages`, or their dict form): an earlier
        ``result.messages`` and a new :class:`UserMessage`. A history that breaks a rule raises
        :class:`InvalidMessage` naming the message's index and field; nothing is sent. ``context`` is a
        value of yours every tool of the run reads as ``ctx.context`` (never sent to the model, never
        stored)."""
        text, history = _input(input)
        key = _enter_context(context)
        try:
            return _result(json.loads(await self._native.run(text, history, key)), self._decode_output)
        finally:
            _leave_context(key)

    async def stream(self, input: str | Sequence[Message | Mapping[str, Any]] | Sequence[content.Part | str], *,
                     context: Any = _NO_CONTEXT) -> AsyncGenerator[events.AgentEvent, None]:
        """Runs the loop like :meth:`run` (same ``input`` and ``context``), yielding its events
        (``ambit.events``) as they happen; the last is :class:`ambit.events.RunFinished` with the result. A
        failed run raises its error after the events before it. Closing the iterator early
        (``contextlib.aclosing``, or when it is collected) cancels the run, its HTTP request and its tools."""
        text, history = _input(input)
        key = _enter_context(context)
        try:
            native = self._native.stream(text, history, key)
            try:
                while (raw := await native.next()) is not None:
                    yield _event(json.loads(raw), self._decode_output)
            finally:
                native.cancel()
        finally:
            _leave_context(key)

    def run_sync(self, input: str | Sequence[Message | Mapping[str, Any]] | Sequence[content.Part | str], *, context: Any = _NO_CONTEXT) -> RunResult:
        """:meth:`run` for code outside asyncio. Inside a running event loop, ``await run()`` instead."""
        try:
            asyncio.get_running_loop()
            running = True
        except RuntimeError:
            running = False
        if running:
            raise RuntimeError("run_sync() was called inside a running event loop; use `await agent.run(...)`")
        # Outside the `except`, so a run's error is not chained to the "no running event loop" probe.
        return asyncio.run(self.run(input, context=context))


def _input(input: Any) -> tuple[str, str | None]:
    """A run's input for the native layer: the text, or the messages as the core's JSON list."""
    if isinstance(input, str):
        return input, None
    if isinstance(input, (list, tuple)):
        if any(content.is_part(m) for m in input):
            # A list of parts (strings among them are text): one user message made of them.
            return "", json.dumps([{"role": "user", "content": [content.part_to_dict(p) for p in input]}])
        return "", json.dumps([message_to_dict(m) for m in input])
    raise TypeError(f"input must be a string, a list of parts or a list of messages, got {type(input).__name__}")


_EVENTS: dict[str, type] = {cls.type: cls for cls in typing.get_args(events.AgentEvent) if cls is not Event}


def _event(raw: dict[str, Any], decode_output: Callable[[Any], Any] | None = None) -> events.AgentEvent:
    kind = raw.pop("type")
    cls = _EVENTS.get(kind)
    if cls is None:
        return Event(kind, raw)
    if "usage" in raw:
        raw["usage"] = Usage(**raw["usage"])
    if kind == "run_finished":
        raw["result"] = _result(raw["result"], decode_output)
    if kind == "approval_requested":
        raw["request"] = ApprovalRequest(**raw["request"])
    event: events.AgentEvent = cls(**raw)
    return event


def _result(raw: dict[str, Any], decode_output: Callable[[Any], Any] | None = None) -> RunResult:
    structured = raw.get("structured_output")
    return RunResult(
        structured_output=None if structured is None or decode_output is None else decode_output(structured),
        cost=raw.get("cost"),
        open_items=[ChecklistItem(**i) for i in raw.get("open_items", [])],
        output=raw["output"],
        tool_calls=[ToolCall(**c) for c in raw["tool_calls"]],
        usage=Usage(**raw["usage"]),
        turns=raw["turns"],
        messages=[message_from_dict(m) for m in raw["messages"]],
        stop_reason=raw.get("stop_reason", "end"),
    )


