"""JSON Schema for a Python function's parameters, from its type hints and docstring."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any, Callable, Literal, Union

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_schema(tp: Any, where: str) -> dict[str, Any]:
    if tp is inspect.Parameter.empty or tp is Any:
        return {}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
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
                    "list, dict, Literal or Optional of these, or pass parameters= explicitly")


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
        if getattr(hint, "__name__", None) == "TaskContext" or hint == "TaskContext":
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
