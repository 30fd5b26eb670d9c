"""MCP and deferral settings from Python: what the core refuses, and how the listing shows deferral.
(The scenario mcp_deferred_tools runs an agent against the real server-everything.)"""

from __future__ import annotations

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
