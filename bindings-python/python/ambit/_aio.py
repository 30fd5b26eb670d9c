"""Completion of the native layer's awaitables, on the event loop's thread."""

from __future__ import annotations

import asyncio
from typing import Any


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
