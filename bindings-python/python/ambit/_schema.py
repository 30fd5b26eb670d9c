"""JSON Schema for a Python function's parameters and for a final answer's type, from type hints and
docstrings; and the decoding of the JSON the core read back into those types (``decode``). The core
checks JSON against the schema (the argument rule); this module only derives the schema and builds the
Python values."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import inspect
import re
import types
import typing
from typing import Any, Callable, Literal, Union

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
_TIMES: dict[Any, str] = {datetime.datetime: "date-time", datetime.date: "date", datetime.time: "time"}


def is_pydantic_model(tp: Any) -> bool:
    """A Pydantic (v2) model class, told by its methods (ambit does not depend on Pydantic)."""
    return isinstance(tp, type) and callable(getattr(tp, "model_json_schema", None)) \
        and callable(getattr(tp, "model_validate", None))


def _inline_refs(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """A Pydantic schema with its ``$defs`` written in place of each ``$ref`` (the argument rule reads
    schemas without references)."""
    defs = schema.pop("$defs", {})

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref.rsplit("/", 1)[-1]
                if name in seen:
                    raise TypeError(f"{where}: the model '{name}' refers to itself; a recursive type has no "
                                    "schema the argument rule can read")
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return {**walk(defs[name], seen + (name,)), **walk(rest, seen)}
            return {k: walk(v, seen) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, seen) for v in node]
        return node

    out: dict[str, Any] = walk(schema, ())
    return out


def _object_schema(hints: dict[str, Any], required: list[str], where: str) -> dict[str, Any]:
    props = {name: type_schema(tp, f"{where}, field '{name}'") for name, tp in hints.items()}
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def type_schema(tp: Any, where: str) -> dict[str, Any]:
    if tp is inspect.Parameter.empty or tp is Any:
        return {}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if tp in _TIMES:
        return {"type": "string", "format": _TIMES[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        values = [m.value for m in tp]
        kinds = {type(v) for v in values}
        out_enum: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and next(iter(kinds)) in _SCALARS:
            out_enum["type"] = _SCALARS[next(iter(kinds))]
        return out_enum
    if is_pydantic_model(tp):
        return _inline_refs(dict(tp.model_json_schema()), where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = [f for f in dataclasses.fields(tp) if f.init]
        required = [f.name for f in fields
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        return _object_schema({f.name: hints.get(f.name, Any) for f in fields}, required, where)
    if typing.is_typeddict(tp):
        hints = typing.get_type_hints(tp)
        return _object_schema(hints, [k for k in hints if k in tp.__required_keys__], where)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        # A fixed tuple: each position its own type, the length held.
        return {"type": "array", "prefixItems": [type_schema(a, where) for a in args],
                "minItems": len(args), "maxItems": len(args)}
    if origin is tuple and len(args) == 2:
        return {"type": "array", "items": type_schema(args[0], where)}
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return type_schema(rest[0], where)
        return {"anyOf": [type_schema(a, where) for a in rest]}
    if origin is Literal:
        kinds = {type(a) for a in args}
        out: dict[str, Any] = {"enum": list(args)}
        if len(kinds) == 1 and next(iter(kinds)) in _SCALARS:
            out["type"] = _SCALARS[next(iter(kinds))]
        return out
    if tp in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset, typing.Sequence):
        item = args[0] if args else Any
        return {"type": "array", "items": type_schema(item, where)}
    if tp is dict or origin is dict:
        out = {"type": "object"}
        if len(args) == 2 and args[1] is not Any:
            out["additionalProperties"] = type_schema(args[1], where)
        return out
    raise TypeError(f"{where}: the type {tp!r} has no JSON Schema mapping; use str, int, float, bool, "
                    "datetime, date, time, an Enum, a dataclass, a TypedDict, a Pydantic model, list, tuple, "
                    "dict, Literal or Optional of these, or pass parameters= explicitly")


def decode(tp: Any, value: Any, where: str) -> Any:
    """``value`` (JSON the core read under ``type_schema(tp)``) as a ``tp``: enums, times, dataclasses,
    TypedDicts, Pydantic models and tuples built; anything else as it is. A value the type refuses
    (a date that does not parse) raises ``ValueError`` naming ``where``."""
    if value is None or tp is inspect.Parameter.empty or tp is Any:
        return value
    try:
        if tp in _TIMES:
            return tp.fromisoformat(value)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            return tp(value)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{where}: {value!r} is not a {tp.__name__} ({e})") from None
    if is_pydantic_model(tp):
        return tp.model_validate(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp)
        return tp(**{k: decode(hints.get(k, Any), v, f"{where}.{k}") for k, v in value.items()})
    if typing.is_typeddict(tp) and isinstance(value, dict):
        hints = typing.get_type_hints(tp)
        return {k: decode(hints.get(k, Any), v, f"{where}.{k}") for k, v in value.items()}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return decode(rest[0], value, where) if len(rest) == 1 else value
    if isinstance(value, list):
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return tuple(decode(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        made = [decode(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        if tp in (tuple, set, frozenset) or origin in (tuple, set, frozenset):
            return (origin or tp)(made)
        return made
    if (tp is dict or origin is dict) and isinstance(value, dict) and len(args) == 2:
        return {k: decode(args[1], v, f"{where}.{k}") for k, v in value.items()}
    return value


def _doc_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """The description (text before an Args section) and the per-argument descriptions."""
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    m = re.search(r"^(Args|Arguments|Parameters):\s*$", doc, re.MULTILINE)
    if not m:
        return doc.strip(), {}
    head, body = doc[: m.start()].strip(), doc[m.end():]
    params: dict[str, str] = {}
    current = None
    for line in body.splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            break  # the next section (Returns:, Raises:)
        hit = re.match(r"^\s+(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", line)
        if hit:
            current = hit.group(1).lstrip("*")
            params[current] = hit.group(3).strip()
        elif current and line.strip():
            params[current] = (params[current] + " " + line.strip()).strip()
    return head, params


def function_schema(fn: Callable[..., Any], name: str) -> tuple[str, dict[str, Any]]:
    """(description, parameters schema) for ``fn``."""
    description, arg_docs = _doc_parts(inspect.getdoc(fn))
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to the raw annotations
        hints = {}
    props: dict[str, Any] = {}
    required: list[str] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        hint = hints.get(p.name, p.annotation)
        origin = typing.get_origin(hint) or hint
        if (getattr(origin, "__name__", None) == "TaskContext" or hint in ("TaskContext", "ToolContext")
                or (isinstance(hint, str) and hint.startswith(("ToolContext[", "TaskContext[")))):
            continue  # given by ambit, not by the model
        schema = type_schema(hints.get(p.name, p.annotation), f"tool '{name}', parameter '{p.name}'")
        if p.name in arg_docs:
            schema["description"] = arg_docs[p.name]
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        elif p.default is not None:
            schema["default"] = p.default
        props[p.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = required
    return description, out
