"""Completion of the native layer's awaitables, on the event loop's thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable


def complete(fut: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """Resolves ``fut`` unless it was cancelled meanwhile (``value`` None with ``ok`` False: the Rust task
    was cancelled because ``fut`` was)."""
    if fut.done():
        return
    if ok:
        fut.set_result(value)
    elif value is None:
        fut.cancel()
    else:
        fut.set_exception(value)


def call_in_thread(call: Callable[..., Any], arg: str, token: int | None, answer: Callable[[bool, Any], None]) -> None:
    """Runs a plain tool (or approval handler) on a daemon thread of Python's own and hands its outcome
    to ``answer``: ``(True, value)`` or ``(False, exception)``. A call still running when the interpreter
    exits is ended by Python as any daemon thread is; no native frame is on that thread's stack."""
    def run() -> None:
        try:
            value = call(arg) if token is None else call(arg, token)
        except BaseException as e:  # noqa: B036 -- KeyboardInterrupt and SystemExit leave the run too
            answer(False, e)
        else:
            answer(True, value)

    threading.Thread(target=run, name="ambit-tool", daemon=True).start()
