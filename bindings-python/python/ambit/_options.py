"""How every list- and mapping-typed option is read (the argument rule's spirit, SPEC §3): a bare string
is a one-entry list, a list (or any other iterable that is not a string, bytes or a mapping) of the
right items is itself, and anything else is refused with a :class:`ConfigError` naming the option.
Never a silent default, never a string taken apart into characters."""

from __future__ import annotations

from os import PathLike, fspath
from typing import Any, Callable, Mapping, TypeVar

from .errors import ConfigError

__all__ = ["items", "lone_surrogate", "mapping", "paths", "strings"]

T = TypeVar("T")


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 80 else text[:77] + '...'}"


def items(option: str, value: Any, single: Callable[[Any], bool], item: Callable[[Any], T], what: str,
          item_what: str) -> list[T]:
    """``value`` as a list: one item when ``single(value)``, else each element of an iterable, each
    accepted by ``item`` (which returns it as the core wants it, or raises ``TypeError``)."""
    if single(value):
        elements = [value]
    elif isinstance(value, (str, bytes, bytearray, Mapping)) or not hasattr(value, "__iter__"):
        raise ConfigError(f"{option} must be {what}, got {_show(value)}")
    else:
        elements = list(value)
    out: list[T] = []
    for i, element in enumerate(elements):
        try:
            out.append(item(element))
        except TypeError:
            raise ConfigError(f"{option}[{i}] must be {item_what}, got {_show(element)}") from None
    return out


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def _path(value: Any) -> str:
    if not isinstance(value, (str, PathLike)):
        raise TypeError
    path = fspath(value)
    if not isinstance(path, str):
        raise TypeError
    return path


def strings(option: str, value: Any) -> list[str]:
    """A list of strings; one string is a one-entry list."""
    return items(option, value, lambda v: isinstance(v, str), _string, "a list of strings (or one string)",
                 "a string")


def paths(option: str, value: Any) -> list[str]:
    """A list of paths (``str`` or ``os.PathLike``); one path is a one-entry list."""
    return items(option, value, lambda v: isinstance(v, (str, PathLike)), _path, "a list of paths (or one path)",
                 "a path")


def mapping(option: str, value: Any, check: Callable[[Any], bool] = lambda v: True, what: str = "values") -> dict[str, Any]:
    """A mapping with string keys, each value passing ``check``."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"{option} must be a mapping of names to {what}, got {_show(value)}")
    out: dict[str, Any] = {}
    for key, v in value.items():
        if not isinstance(key, str):
            raise ConfigError(f"{option} must have string keys, got {_show(key)}")
        if not check(v):
            raise ConfigError(f"{option}[{key!r}] must be {what.rstrip('s')}, got {_show(v)}")
        out[key] = v
    return out


def lone_surrogate(value: str) -> int | None:
    """Where ``value`` holds a lone surrogate (a Python ``str`` may; Unicode text may not), or ``None``.
    The caller refuses it naming its argument, before the native module would fail on it untyped."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return e.start
    return None
