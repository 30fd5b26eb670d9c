"""Issue 12, at the Python boundary: a panic in the core is ``ambit.InternalError`` (item 7); an
interpreter exiting with a plain tool still running exits cleanly (item 8); configuration inputs are
read by the argument rule (a bare string is a one-entry list, anything else wrong is a ConfigError
naming the option), a blank tool name is refused, and ``KeyboardInterrupt``/``SystemExit`` leave a run
the same way from plain and async tools (item 10)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

import ambit
from ambit import _native


def scenario(tmp_path: Path, tool: str) -> Path:
    path = tmp_path / f"{tool}.json"
    path.write_text(json.dumps({"name": f"hardening_{tool}", "exchanges": [
        {"respond": {"tool_calls": [{"id": "a", "name": tool, "arguments": {}}]}},
        {"respond": {"content": "done"}},
    ]}))
    return path


def model(base_url: str) -> ambit.OpenAIChat:
    return ambit.OpenAIChat("m", base_url=base_url, api_key="k", max_retries=0)


# --- item 7: panics -------------------------------------------------------------------------------

def test_a_panic_in_a_synchronous_export_is_internal_error() -> None:
    with pytest.raises(ambit.InternalError) as info:
        _native._testing_force_panic()
    assert isinstance(info.value, ambit.AmbitError)
    assert info.value.code == "internal"
    assert "a panic forced by a test" in str(info.value)


def test_a_panic_inside_a_run_is_internal_error(tmp_path: Path, start_provider: Any) -> None:
    p = start_provider(scenario(tmp_path, "ambit_testing_panic"))
    native = _native.NativeAgent(model(p.base_url)._config_json(), [], ledger_tools=_native._testing_panicking_tools())

    async def main() -> str:
        return await native.run("go")

    with pytest.raises(ambit.InternalError, match="a panic forced by a test") as info:
        asyncio.run(main())
    assert info.value.code == "internal"


def test_a_panic_inside_a_streamed_run_is_internal_error(tmp_path: Path, start_provider: Any) -> None:
    p = start_provider(scenario(tmp_path, "ambit_testing_panic"))
    native = _native.NativeAgent(model(p.base_url)._config_json(), [], ledger_tools=_native._testing_panicking_tools())

    async def main() -> list[str]:
        stream, seen = native.stream("go"), []
        while (raw := await stream.next()) is not None:
            seen.append(json.loads(raw)["type"])
        return seen

    with pytest.raises(ambit.InternalError, match="a panic forced by a test"):
        asyncio.run(main())


# --- item 8: exit with a tool in flight ------------------------------------------------------------

EXIT_WITH_A_TOOL_RUNNING = textwrap.dedent('''
    import asyncio, sys, threading, time
    import ambit

    started = threading.Event()

    @ambit.tool
    def busy() -> str:
        """Never returns; wakes every few milliseconds, so it also wakes while the interpreter finalizes."""
        started.set()
        while True:
            time.sleep(0.002)

    async def main() -> None:
        agent = ambit.Agent(model=ambit.OpenAIChat("m", base_url=sys.argv[1], api_key="k", max_retries=0),
                            tools=[busy])
        run = asyncio.ensure_future(agent.run("go"))
        await asyncio.to_thread(started.wait)
        run.cancel()
        try:
            await run
        except asyncio.CancelledError:
            pass
        print("cancelled with the tool in flight; exiting", flush=True)

    garbage = [{"n": [i]} for i in range(100_000)]  # keeps finalization busy while the tool wakes
    asyncio.run(main())
''')


def test_the_interpreter_exits_cleanly_with_a_plain_tool_still_running(tmp_path: Path, start_provider: Any) -> None:
    p = start_provider(scenario(tmp_path, "busy"))
    script = tmp_path / "exit_with_a_tool_running.py"
    script.write_text(EXIT_WITH_A_TOOL_RUNNING)
    out = subprocess.run([sys.executable, str(script), p.base_url], capture_output=True, text=True, timeout=120)
    assert "cancelled with the tool in flight; exiting" in out.stdout, out.stderr
    assert "Fatal Python error" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr


# --- item 10: configuration inputs ----------------------------------------------------------------

def listing(agent: ambit.Agent) -> dict[str, str]:
    return {t.name: t.status for t in agent.list_tools()}


def test_a_bare_string_is_a_one_entry_list_in_every_policy_list() -> None:
    policy = ambit.Policy(level="read", block_tools="shell_execute")
    assert policy.block_tools == ("shell_execute",)
    agent = ambit.Agent(model=model("http://127.0.0.1:9/v1"), builtins=["shell_execute", "file_read"], policy=policy)
    assert listing(agent) == {"shell_execute": "blocked", "file_read": "offered"}

    allowed = ambit.Policy(allow_tools="file_read")
    assert allowed.allow_tools == ("file_read",)
    agent = ambit.Agent(model=model("http://127.0.0.1:9/v1"), builtins=["shell_execute", "file_read"], policy=allowed)
    assert listing(agent) == {"shell_execute": "blocked", "file_read": "offered"}

    here = os.getcwd()
    assert ambit.Policy(workspace_directories=here).workspace_directories == (here,)
    assert ambit.Policy(readable_directories=Path(here)).readable_directories == (here,)


def test_control_a_list_blocks_the_same_and_no_filter_offers_it() -> None:
    # The same agent without the filter offers shell_execute: the blocked status above is the filter's.
    agent = ambit.Agent(model=model("http://127.0.0.1:9/v1"), builtins=["shell_execute", "file_read"],
                        policy=ambit.Policy(level="unrestricted"))
    assert listing(agent) == {"shell_execute": "offered", "file_read": "offered"}
    agent = ambit.Agent(model=model("http://127.0.0.1:9/v1"), builtins=["shell_execute", "file_read"],
                        policy=ambit.Policy(block_tools=["shell_execute"]))
    assert listing(agent)["shell_execute"] == "blocked"


def test_a_bare_string_is_a_one_entry_list_in_every_other_list_option() -> None:
    agent = ambit.Agent(model=model("http://127.0.0.1:9/v1"), builtins="file_read")
    assert agent._native.tool_names() == ["file_read"]
    assert ambit.tool(allow_blank="note")(_note).allow_blank == ["note"]
    assert ambit.Deferral(deferrable_tools="forecast").deferrable_tools == ("forecast",)
    server = ambit.McpServer.stdio("s", "cmd", "--verbose", eager_load_tools="read_file")
    assert server.transport["args"] == ["--verbose"]
    assert server.eager_load_tools == ("read_file",)
    one = ambit.tool(_note)
    assert [t.name for t in ambit.Agent(model=model("http://127.0.0.1:9/v1"), tools=one).tools] == ["_note"]


def _note(note: str) -> str:
    """Echo."""
    return note


WRONG: list[tuple[str, Callable[[], Any]]] = [
    ("block_tools", lambda: ambit.Policy(block_tools=5)),  # type: ignore[arg-type]
    ("block_tools", lambda: ambit.Policy(block_tools=b"shell_execute")),  # type: ignore[arg-type]
    ("block_tools[1]", lambda: ambit.Policy(block_tools=["file_read", 3])),  # type: ignore[list-item]
    ("allow_tools", lambda: ambit.Policy(allow_tools={"file_read": True})),  # type: ignore[arg-type]
    ("level_overrides", lambda: ambit.Policy(level_overrides=["shell_execute"])),  # type: ignore[arg-type]
    ("level_overrides", lambda: ambit.Policy(level_overrides={"x": 1})),  # type: ignore[dict-item]
    ("workspace_directories", lambda: ambit.Policy(workspace_directories=7)),  # type: ignore[arg-type]
    ("confine_reads", lambda: ambit.Policy(confine_reads="false")),  # type: ignore[arg-type]
    ("level", lambda: ambit.Policy(level=None)),  # type: ignore[arg-type]
    ("builtins", lambda: ambit.Agent(model=model("http://127.0.0.1:9/v1"), builtins=7)),  # type: ignore[arg-type]
    ("tools", lambda: ambit.Agent(model=model("http://127.0.0.1:9/v1"), tools="file_read")),  # type: ignore[arg-type]
    ("mcp", lambda: ambit.Agent(model=model("http://127.0.0.1:9/v1"), mcp="server")),  # type: ignore[arg-type]
    ("prices", lambda: ambit.Agent(model=model("http://127.0.0.1:9/v1"), prices=["m"])),  # type: ignore[arg-type]
    ("allow_blank", lambda: ambit.tool(allow_blank=5)(_note)),  # type: ignore[call-overload]
    ("deferrable_tools", lambda: ambit.Deferral(deferrable_tools=None)),  # type: ignore[arg-type]
    ("eager_load_tools", lambda: ambit.McpServer.http("s", "http://x", eager_load_tools=1)),  # type: ignore[arg-type]
    ("levels", lambda: ambit.McpServer.http("s", "http://x", levels=["read"])),  # type: ignore[arg-type]
    ("args", lambda: ambit.McpServer.stdio("s", "cmd", 5)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("option,make", WRONG, ids=[f"{o}-{i}" for i, (o, _) in enumerate(WRONG)])
def test_a_wrong_type_is_a_config_error_naming_the_option(option: str, make: Callable[[], Any]) -> None:
    with pytest.raises(ambit.ConfigError) as info:
        make()
    assert info.value.code == "config"
    assert option in str(info.value), str(info.value)


@pytest.mark.parametrize("name", ["", "   "])
def test_a_blank_tool_name_is_refused(name: str) -> None:
    blank = ambit.tool(name=name)(_note)
    assert blank.name == name, "a name given is kept, not replaced by the function's"
    with pytest.raises(ambit.ConfigError) as info:
        ambit.Agent(model=model("http://127.0.0.1:9/v1"), tools=[blank])
    assert info.value.code == "config"
    assert "name" in str(info.value)


# --- item 10: KeyboardInterrupt and SystemExit leave the run, from plain and async tools -----------

def stopping_tool(exc: BaseException, is_async: bool) -> ambit.Tool:
    if is_async:
        async def stop() -> str:
            """Stops the program."""
            raise exc
        return ambit.tool(stop)

    def stop_sync() -> str:
        """Stops the program."""
        raise exc
    return ambit.tool(name="stop")(stop_sync)


@pytest.mark.parametrize("is_async", [False, True], ids=["plain", "async"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=["KeyboardInterrupt", "SystemExit"])
def test_keyboard_interrupt_and_system_exit_leave_the_run(tmp_path: Path, start_provider: Any, exc: BaseException,
                                                          is_async: bool) -> None:
    p = start_provider(scenario(tmp_path, "stop"))
    agent = ambit.Agent(model=model(p.base_url), tools=[stopping_tool(exc, is_async)])
    with pytest.raises(type(exc)) as info:
        agent.run_sync("go")
    assert info.value is exc
    if isinstance(exc, SystemExit):
        assert info.value.code == 3


@pytest.mark.parametrize("is_async", [False, True], ids=["plain", "async"])
def test_keyboard_interrupt_leaves_a_streamed_run(tmp_path: Path, start_provider: Any, is_async: bool) -> None:
    p = start_provider(scenario(tmp_path, "stop"))
    exc = KeyboardInterrupt()
    agent = ambit.Agent(model=model(p.base_url), tools=[stopping_tool(exc, is_async)])

    async def main() -> None:
        async for _ in agent.stream("go"):
            pass

    with pytest.raises(KeyboardInterrupt) as info:
        asyncio.run(main())
    assert info.value is exc


@pytest.mark.parametrize("is_async", [False, True], ids=["plain", "async"])
def test_control_any_other_exception_is_an_error_result_and_the_run_goes_on(
        tmp_path: Path, start_provider: Any, is_async: bool) -> None:
    p = start_provider(scenario(tmp_path, "stop"))
    agent = ambit.Agent(model=model(p.base_url), tools=[stopping_tool(ValueError("no"), is_async)])
    result = agent.run_sync("go")
    assert result.output == "done"
    assert result.tool_calls[0].is_error and "no" in result.tool_calls[0].result
