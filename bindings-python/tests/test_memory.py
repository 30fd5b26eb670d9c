"""Memory from Python, on SQLite (and PostgreSQL when the suite has a server): remember -> recall ->
forget -> list -> export, a key updated in place, typed refusals naming the field, and an agent given a
memory store gets the memory tools (and one without none)."""

import asyncio
import json
import os

import pytest

import ambit
from ambit.memory import InvalidMemoryArgument, Memory, MemoryRecord


def run(coro):
    return asyncio.run(coro)


def urls(tmp_path):
    out = [f"sqlite://{tmp_path}/memory.db"]
    pg = os.environ.get("AMBIT_TEST_POSTGRES_URL")
    if pg:
        out.append(pg)
    return out


def test_remember_recall_forget_list_export(tmp_path):
    async def main(url):
        memory = await Memory.open(url)
        agent = f"py-{os.getpid()}-{len(url)}"  # PostgreSQL is shared by the suites: a namespace of our own
        saved = await memory.remember(agent, "Refunds over 500 EUR need a second approver from finance.",
                                      title="Refund limit", kind="instruction", tags="Billing", salience=8)
        assert saved.created and isinstance(saved.memory, MemoryRecord)
        assert saved.memory.tags == ["billing"] and saved.memory.kind == "instruction"
        other = await memory.remember(agent, "The office wifi is Acme-Guest.", key="wifi")
        hits = await memory.recall(agent, "who approves large refunds")
        assert [m.id for m in hits] == [saved.memory.id]
        baseline = await memory.recall(agent)
        assert [m.id for m in baseline] == [saved.memory.id, other.memory.id]
        assert [m.id for m in await memory.recall(agent, tags=["billing"], kind="instruction")] == [saved.memory.id]
        updated = await memory.remember(agent, key="wifi", salience=9)
        assert not updated.created and updated.memory.id == other.memory.id
        assert updated.memory.body == "The office wifi is Acme-Guest." and updated.memory.salience == 9
        assert [m.id for m in await memory.list(agent)] == [saved.memory.id, other.memory.id]
        export = json.loads(await memory.export(agent))
        assert export["version"] == 1 and len(export["memories"]) == 2
        assert await memory.forget(agent, key="wifi") is True
        assert await memory.forget(agent, id=other.memory.id) is False
        assert await memory.forget(agent, id=saved.memory.id) is True
        assert await memory.list(agent) == []

    for url in urls(tmp_path):
        run(main(url))


def test_refusals_are_typed_and_name_the_field(tmp_path):
    async def main():
        memory = await Memory.open(f"sqlite://{tmp_path}/m.db")
        cases = [
            (dict(body="x" * 8193), "body"),
            (dict(body="b", title="t" * 201), "title"),
            (dict(body="b", salience=11), "salience"),
            (dict(body="b", tags=["x" * 65]), "tags"),
            (dict(body="b", kind="rumour"), "kind"),
            (dict(body="b\ud800"), "body"),
            (dict(body="b", title="\udfff"), "title"),
            (dict(body="b", tags=["ok", "\ud800"]), "tags"),
            (dict(body="b", salience=2 ** 80), "salience"),
            (dict(body="b", salience=-(2 ** 70)), "salience"),
        ]
        for kwargs, field in cases:
            with pytest.raises(InvalidMemoryArgument) as info:
                await memory.remember("a", **kwargs)
            assert info.value.field == field, info.value
            assert info.value.code == "memory_invalid_argument"
            assert isinstance(info.value, ambit.AmbitError) and isinstance(info.value, ValueError)
        # Negative control: at the limits it is accepted.
        await memory.remember("a", "x" * 8192, title="t" * 200, salience=10, tags=["x" * 64])
        with pytest.raises(InvalidMemoryArgument) as info:
            await memory.recall("a", limit=51)
        assert info.value.field == "limit"
        with pytest.raises(InvalidMemoryArgument):
            await memory.forget("a")
        # Out of the 64-bit range, a negative limit, a lone surrogate in the agent's name or the query:
        # each the typed refusal naming its argument (was OverflowError, UnicodeEncodeError, 'recall').
        for call, field in [
            (memory.forget("a", id=2 ** 70), "id"),
            (memory.forget("a", id=-(2 ** 64)), "id"),
            (memory.recall("a", limit=-1), "limit"),
            (memory.recall("a", limit=0), "limit"),
            (memory.recall("a", query="x\ud800"), "query"),
            (memory.remember("a\ud800", "b"), "agent"),
            (memory.recall("a\ud800"), "agent"),
            (memory.list("\udc00"), "agent"),
        ]:
            with pytest.raises(InvalidMemoryArgument) as info:
                await call
            assert info.value.field == field, info.value
        # Control: the same calls in range are accepted.
        assert await memory.forget("a", id=2 ** 62) is False
        assert len(await memory.recall("a", limit=1)) == 1
        with pytest.raises(InvalidMemoryArgument) as info:
            await Memory.open("mysql://nope")
        assert info.value.field == "url"

    run(main())


def test_an_agent_has_memory_tools_only_with_memory(tmp_path):
    async def main():
        memory = await Memory.open(f"sqlite://{tmp_path}/m.db")
        with_memory = ambit.Agent(model="gpt-4.1", memory=memory, agent_name="bot")
        names = [t.name for t in with_memory.list_tools()]
        assert names == ["memory_recall", "memory_caller_context", "memory_remember", "memory_forget",
                         "memory_record_preference"]
        assert all(t.level == "read" for t in with_memory.list_tools())
        without = ambit.Agent(model="gpt-4.1")
        assert not [t for t in without.list_tools() if t.name.startswith("memory_")]
        with pytest.raises(ambit.ConfigError):
            ambit.Agent(model="gpt-4.1", memory=memory)
        with pytest.raises(ambit.ConfigError):
            ambit.Agent(model="gpt-4.1", memory="sqlite:///tmp/x.db", agent_name="bot")  # type: ignore[arg-type]
        with pytest.raises(ambit.ConfigError):
            ambit.Agent(model="gpt-4.1", memory=memory, agent_name=" ")

    run(main())
