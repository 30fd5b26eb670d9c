"""The README's way to leave a stream early, `contextlib.aclosing(agent.stream(...))`, runs and
type-checks: `stream` is an async generator (it has `aclose`), and scripts/test-python.sh runs
mypy --strict over this file (with `AsyncIterator` as its annotation, mypy refused the `aclosing`)."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import ambit
from ambit.events import AgentEvent


async def first_event(agent: ambit.Agent) -> AgentEvent:
    async with aclosing(agent.stream("Weather in Paris?")) as events:
        async for event in events:
            return event
    raise AssertionError("the stream ended without an event")


def test_aclosing_leaves_a_stream_early() -> None:
    agent = ambit.Agent(model=ambit.TestModel(["It is sunny."]))
    assert asyncio.run(first_event(agent)).type == "run_started"
