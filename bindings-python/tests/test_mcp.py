"""MCP and deferral settings from Python: what the core refuses, and how the listing shows deferral.
(The scenario mcp_deferred_tools runs an agent against the real server-everything.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import ambit


def weather(city: str) -> str:
    """Current weather for a city."""
    return "sunny"


def forecast(city: str) -> str:
    """Tomorrow's forecast for a city."""
    return "rain"


def test_a_bad_server_name_or_setting_is_a_config_error() -> None:
    with pytest.raises(ambit.ConfigError, match="MCP server name 'no spaces'"):
        ambit.Agent(model="gpt-4.1", mcp=[ambit.McpServer.stdio("no spaces", "node")])
    with pytest.raises(ambit.ConfigError, match="lazy"):
        ambit.Agent(model="gpt-4.1", deferral=ambit.Deferral(setting="lazy"))  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match=r"mcp\[0\] must be an ambit.McpServer"):
        ambit.Agent(model="gpt-4.1", mcp=["node server.js"])  # type: ignore[list-item]


def test_the_listing_shows_deferred_and_hidden_host_tools() -> None:
    tools = [ambit.tool(weather, level="read"), ambit.tool(forecast, level="read")]
    agent = ambit.Agent(model="gpt-4.1", tools=tools, deferral=ambit.Deferral(deferrable_tools=["forecast"]))
    assert [(t.name, t.status) for t in agent.list_tools()] == [("weather", "offered"), ("forecast", "deferred")]
    agent = ambit.Agent(model="gpt-4.1", tools=tools,
                        deferral=ambit.Deferral(setting="hidden", deferrable_tools=["forecast"]))
    assert [(t.name, t.status) for t in agent.list_tools()] == [("weather", "offered"), ("forecast", "hidden")]
    agent = ambit.Agent(model="gpt-4.1", tools=tools,
                        deferral=ambit.Deferral(strategy="eager", deferrable_tools=["forecast"]))
    assert [t.status for t in agent.list_tools()] == ["offered", "offered"]


def test_server_settings_reach_the_core_as_plain_data() -> None:
    s = ambit.McpServer.http("docs", "http://127.0.0.1:1/mcp", trusted=True, levels={"search": "read"},
                             deferral="eager", eager_load_tools=["fetch"], protocol="auto")
    assert s._config() == {"name": "docs", "transport": {"type": "http", "url": "http://127.0.0.1:1/mcp"},
                           "protocol": "auto", "trusted": True, "levels": {"search": "read"},
                           "eager_load_tools": ["fetch"], "deferral": "eager"}
    # A server that cannot start is no configuration error: it is reported unavailable at run time.
    ambit.Agent(model="gpt-4.1", mcp=[ambit.McpServer.stdio("gone", "/nonexistent/server")])


META = ("mcp_resource_list", "mcp_resource_template_list", "mcp_resource_read", "mcp_prompt_list", "mcp_prompt_get",
        "mcp_list_all", "mcp_resource_read_any")


def test_refresh_tools_lists_a_real_server_before_a_run() -> None:
    import asyncio

    from test_scenarios import mcp_dir

    js = mcp_dir() / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
    server = ambit.McpServer.stdio("everything", "node", [str(js), "stdio"], levels={"echo": "read"},
                                   eager_load_tools=["get-sum"])
    gone = ambit.McpServer.stdio("gone", "/nonexistent/server")
    agent = ambit.Agent(model="gpt-4.1", mcp=[server, gone])
    # Before: only the seven resource and prompt meta-tools; the servers' tools once they are listed.
    assert [t.name for t in agent.list_tools()] == list(META)
    asyncio.run(agent.refresh_tools())
    listing = {t.name: t for t in agent.list_tools()}
    assert (listing["mcp__everything__echo"].status, listing["mcp__everything__echo"].level) == ("deferred", "read")
    assert (listing["mcp__everything__get-sum"].status, listing["mcp__everything__get-sum"].level) == \
        ("offered", "unrestricted")
    assert listing["mcp_prompt_get"].status == "deferred"
    assert not any(name.startswith("mcp__gone__") for name in listing)


GITHUB = "ghp_PyMcpBearerToken0123456789"
API = "api-key-py-mcp-7c1d2e3f"
STATIC = "static-py-header-91ab"


def quoting_server() -> Any:
    """tests/mcp/quoting_server.py: refuses every request with 401 quoting its headers; ``seen()`` reads
    what it was sent."""
    import subprocess
    import sys
    import urllib.request

    from conftest import REPO

    proc = subprocess.Popen([sys.executable, str(REPO / "tests/mcp/quoting_server.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()

    def seen() -> list[dict[str, str]]:
        with urllib.request.urlopen(url.removesuffix("/mcp") + "/seen") as r:
            return json.load(r)  # type: ignore[no-any-return]
    return proc, url, seen


def test_an_mcp_server_gets_its_credentials_as_headers_and_env_and_the_model_none(
        start_provider: Any, tmp_path: Path) -> None:
    """The bindings' MCP credential settings reach a real HTTP server (bearer, credential header, static
    header) and a stdio server's environment; the HTTP server's 401 quotes the headers, and that reason
    reaches the model redacted: the quoted header is there as ``[credential:github]`` (the control that
    the quote reached the model at all), the value nowhere."""
    from conftest import close_stdin_and_wait

    proc, url, seen = quoting_server()
    try:
        scenario = tmp_path / "mcp_credentials.json"
        scenario.write_text(json.dumps({"name": "mcp-credentials", "exchanges": [
            {"respond": {"tool_calls": [{"id": "c1", "name": "mcp_list_all", "arguments": {}}]}},
            {"respond": {"content": "done"}}]}))
        provider = start_provider(scenario)
        dump = tmp_path / "env.txt"
        creds = ambit.Credentials().value("api", API).callback("github", lambda alias: GITHUB)
        http = ambit.McpServer.http("remote", url, bearer="github", credential_headers={"X-Api-Key": "api"},
                                    headers={"X-Static-Key": STATIC})
        stdio = ambit.McpServer.stdio("envdump", "/bin/sh", ["-c", f"printf '%s' \"$MCP_TOKEN\" > '{dump}'; exit 1"],
                                      credential_env={"MCP_TOKEN": "github"})
        agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-test"),
                            mcp=[http, stdio], deferral=ambit.Deferral(setting="eager"), credentials=creds)
        result = agent.run_sync("list everything")
        first = seen()[0]
        assert first["authorization"] == f"Bearer {GITHUB}"
        assert (first["x-api-key"], first["x-static-key"]) == (API, STATIC)
        assert dump.read_text() == GITHUB
        reached = json.dumps(provider.state()["requests"]) + result.tool_calls[0].result
        for value in (GITHUB, API, STATIC):
            assert value not in reached, f"{value} reached the model: {reached}"
        assert "remote" in reached and "[credential:github]" in reached, reached
    finally:
        close_stdin_and_wait(proc, 5)


def test_mcp_credential_settings_are_checked_by_name() -> None:
    with pytest.raises(ambit.ConfigError, match=r"MCP server 'h': credential_headers\['X'\]"):
        ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", credential_headers={"X": 1})  # type: ignore[dict-item]
    with pytest.raises(ambit.ConfigError, match="MCP server 'h': bearer must be a credential alias"):
        ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", bearer=5)  # type: ignore[arg-type]
    # The core refuses a credential setting on the wrong transport, naming it.
    bad = ambit.McpServer("s", {"type": "stdio", "command": "x"}, bearer="github")
    with pytest.raises(ambit.ConfigError, match="HTTP server, not stdio"):
        ambit.Agent(model="gpt-4.1", mcp=[bad], credentials=ambit.Credentials().value("github", "x"))
