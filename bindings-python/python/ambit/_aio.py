"""Completion of the native layer's awaitables, on the event loop's thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")


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


def sync(name: str, make: Callable[[], Awaitable[T]]) -> T:
    """The ``*_sync`` twin of an async method ``name``: runs ``make()`` to completion on a fresh event loop
    (``asyncio.run``), for code outside asyncio. Inside a running event loop it refuses, naming the
    awaitable to use instead (blocking the loop's thread would deadlock the callbacks the run needs)."""
    try:
        asyncio.get_running_loop()
        running = True
    except RuntimeError:
        running = False
    if running:
        raise RuntimeError(f"{name}_sync() was called inside a running event loop; use `await ...{name}(...)`")

    async def go() -> T:
        return await make()
    # Outside the `except`, so an error is not chained to the "no running event loop" probe.
    return asyncio.run(go())
