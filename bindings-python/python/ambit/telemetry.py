"""Telemetry: the core's spans exported over OTLP/HTTP, and its log records in :mod:`logging`.

Spans follow the OpenTelemetry GenAI semantic conventions: ``invoke_agent`` (a run) > ``turn`` >
``chat {model}`` (a model request) and ``execute_tool {name}`` (a tool call), with
``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.conversation.id`` (a session's id) and ``ambit.run.id``. Message contents are recorded only
with ``record_content=True``, and then after the credential redactor. Export is off by default, and
off costs nothing.

>>> import ambit.telemetry
>>> ambit.telemetry.enable("http://localhost:4318")          # doctest: +SKIP
>>> ambit.telemetry.flush(); ambit.telemetry.disable()        # doctest: +SKIP

Logging: the core's records reach :mod:`logging` under loggers named by module (``ambit.agent``,
``ambit.tools``, ``ambit.mcp.client``, …), levels mapped (Rust ``WARN`` is ``WARNING``, ``TRACE`` is
below ``DEBUG``). The bridge caches each logger's level on its first record: after changing levels
at run time, call :func:`reset_logging`.
"""

from __future__ import annotations

from typing import Mapping

from . import _native

__all__ = ["enable", "disable", "flush", "reset_logging"]


def enable(
    endpoint: str,
    *,
    headers: Mapping[str, str] | None = None,
    record_content: bool = False,
    service_name: str = "ambit",
) -> None:
    """Turns export on: spans go to the collector at ``endpoint`` (OTLP/HTTP with protobuf bodies; a
    base URL such as ``http://localhost:4318`` gets ``/v1/traces``), with ``headers`` on every export.
    ``record_content`` adds message contents (redacted). Calling it again after :func:`disable` turns
    export on again; a process exports to one endpoint. Raises :class:`ambit.ConfigError` for an
    endpoint that is not an http(s) URL or not the first one."""
    if not isinstance(endpoint, str):
        raise TypeError(f"endpoint must be a str, got {type(endpoint).__name__}")
    if not isinstance(record_content, bool):
        raise TypeError(f"record_content must be True or False, got {record_content!r}")
    pairs = [(str(k), str(v)) for k, v in (headers or {}).items()]
    _native.telemetry_enable(endpoint, pairs, record_content, service_name)


def flush() -> None:
    """Exports every finished span not yet sent, waiting for the collector's answer. A collector that
    cannot be reached is logged (``ambit.telemetry``, WARNING), never raised: telemetry does not fail
    the host."""
    _native.telemetry_flush()


def disable() -> None:
    """Exports what is pending and turns export off (and content recording with it)."""
    _native.telemetry_disable()


def reset_logging() -> None:
    """Forgets the logging bridge's cached logger levels (after :mod:`logging` is reconfigured)."""
    _native.telemetry_reset_logging()
