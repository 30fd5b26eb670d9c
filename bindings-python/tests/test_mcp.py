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


def oauth_server() -> Any:
    """tests/mcp/oauth_server.py (the `mcp` package's authorization server and an MCP server it protects),
    run by the MCP servers' virtualenv scripts/mcp-servers.sh installs; ``stats()`` reads its counters."""
    import subprocess
    import urllib.request

    from conftest import REPO

    out = subprocess.run(["bash", str(REPO / "scripts" / "mcp-servers.sh")], check=True, capture_output=True, text=True)
    python = Path(out.stdout.strip()) / "venv" / "bin" / "python"
    proc = subprocess.Popen([str(python), str(REPO / "tests/mcp/oauth_server.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()

    def stats() -> dict[str, int]:
        with urllib.request.urlopen(url.removesuffix("/mcp") + "/stats") as r:
            return json.load(r)  # type: ignore[no-any-return]
    return proc, url, stats


def browser(seen: list[str]) -> Any:
    """The consent step of a logged-in user who agrees: follow the authorization URL, not its redirect,
    and hand back where it points."""
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    def on_authorize(url: str) -> str:
        seen.append(url)
        try:
            urllib.request.build_opener(NoRedirect).open(url)
        except urllib.error.HTTPError as e:
            return str(e.headers["location"])
        raise AssertionError("the authorization endpoint did not redirect")
    return on_authorize


def test_an_oauth_mcp_server_with_consent_elicitation_and_a_token_store(start_provider: Any, tmp_path: Path) -> None:
    """OAuth against a real protected server: one consent (PKCE, this resource), the tools run with the
    token, the server's elicitation reaches the handler; the token sits in the host's store and never
    reaches the model. Controls: a wrong bearer token is refused, and with no elicitation handler the
    request is declined."""
    from urllib.parse import parse_qs, urlparse

    from conftest import close_stdin_and_wait

    proc, url, stats = oauth_server()
    try:
        scenario = tmp_path / "oauth.json"
        scenario.write_text(json.dumps({"name": "mcp-oauth", "exchanges": [
            {"respond": {"tool_calls": [{"id": "c1", "name": "mcp__notes__whoami", "arguments": {}}]}},
            {"respond": {"tool_calls": [{"id": "c2", "name": "mcp__notes__ask_name", "arguments": {}}]}},
            {"respond": {"content": "done"}}]}))
        provider = start_provider(scenario)
        saved: dict[str, str] = {}

        class Store:
            def load(self, key: str) -> str | None:
                return saved.get(key)

            def save(self, key: str, value: str) -> None:
                saved[key] = value

            def clear(self, key: str) -> None:
                saved.pop(key, None)

        asked: list[ambit.ElicitationRequest] = []

        def on_elicit(request: ambit.ElicitationRequest) -> ambit.ElicitationAnswer:
            asked.append(request)
            return {"name": "Ada"}

        consents: list[str] = []
        oauth = ambit.OAuth(client_name="ambit-py", redirect_uri="http://127.0.0.1:1/callback",
                            on_authorize=browser(consents), token_store=Store())
        server = ambit.McpServer.http("notes", url, oauth=oauth, on_elicit=on_elicit)
        agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-test"),
                            mcp=[server], deferral=ambit.Deferral(setting="eager"))
        result = agent.run_sync("who am I?")
        assert result.output == "done"
        assert len(consents) == 1
        query = parse_qs(urlparse(consents[0]).query)
        assert query["code_challenge_method"] == ["S256"] and query["resource"] == [url]
        assert '"scopes": ["notes:read"]' in result.tool_calls[0].result, result.tool_calls[0].result
        assert result.tool_calls[1].result.startswith("hello Ada"), result.tool_calls[1].result
        assert [(r.server, r.mode, r.message) for r in asked] == [("notes", "form", "What is your name?")]
        token = json.loads(saved[url])["token_response"]["access_token"]
        assert token.startswith("at-")
        reached = json.dumps(provider.state()["requests"]) + json.dumps([c.result for c in result.tool_calls])
        assert token not in reached
        assert stats()["codes_exchanged"] == 1

        # Controls: a bearer token the server never issued is refused; no elicitation handler: declined.
        creds = ambit.Credentials().value("wrong", "at-never-issued-by-this-server")
        wrong = ambit.Agent(model="gpt-4.1", mcp=[ambit.McpServer.http("notes", url, bearer="wrong")],
                            credentials=creds)
        wrong.refresh_tools_sync()
        assert not [t for t in wrong.list_tools() if t.name.startswith("mcp__notes__")]
        plain = ambit.McpServer.http("notes", url, oauth=ambit.OAuth(
            redirect_uri="http://127.0.0.1:1/callback", on_authorize=browser([]), token_store=Store()))
        scenario.write_text(json.dumps({"name": "mcp-oauth-2", "exchanges": [
            {"respond": {"tool_calls": [{"id": "c1", "name": "mcp__notes__ask_name", "arguments": {}}]}},
            {"respond": {"content": "done"}}]}))
        provider = start_provider(scenario)
        agent = ambit.Agent(model=ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-test"),
                            mcp=[plain], deferral=ambit.Deferral(setting="eager"))
        result = agent.run_sync("ask")
        assert result.tool_calls[0].result.startswith("no name: decline"), result.tool_calls[0].result
    finally:
        close_stdin_and_wait(proc, 5)


def test_oauth_settings_are_checked_by_name(tmp_path: Path) -> None:
    with pytest.raises(ambit.ConfigError, match="oauth.grant"):
        ambit.OAuth(grant="password")  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="oauth.token_store must be a path or have load, save and clear"):
        ambit.OAuth(redirect_uri="http://x/cb", token_store=object())  # type: ignore[arg-type]
    with pytest.raises(ambit.ConfigError, match="on_elicit must be callable"):
        ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", on_elicit=5)  # type: ignore[arg-type]
    # The core checks the rest, naming the field.
    server = ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", oauth=ambit.OAuth(on_authorize=lambda u: u))
    with pytest.raises(ambit.ConfigError, match="oauth.redirect_uri is required"):
        ambit.Agent(model="gpt-4.1", mcp=[server])
    cc = ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", oauth=ambit.OAuth(grant="client_credentials"))
    with pytest.raises(ambit.ConfigError, match="oauth.client_id is required"):
        ambit.Agent(model="gpt-4.1", mcp=[cc])
    stdio = ambit.McpServer("s", {"type": "stdio", "command": "x"}, oauth=ambit.OAuth(redirect_uri="http://x/cb"))
    with pytest.raises(ambit.ConfigError, match="oauth is for an HTTP server"):
        ambit.Agent(model="gpt-4.1", mcp=[stdio])
    # The authorization-server pin: https (or loopback http) only, named; it reaches the core.
    pinned = ambit.OAuth(redirect_uri="http://x/cb", on_authorize=lambda u: u, issuer="http://as.example")
    with pytest.raises(ambit.ConfigError, match="oauth.issuer: refused http://as.example/: plain http"):
        ambit.Agent(model="gpt-4.1", mcp=[ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", oauth=pinned)])
    good = ambit.McpServer.http("h", "http://127.0.0.1:1/mcp", oauth=ambit.OAuth(redirect_uri="http://x/cb",
                                                                                 issuer="https://as.example"))
    assert good._config()["oauth"]["issuer"] == "https://as.example"
    # A path is a file store.
    filed = ambit.McpServer.http("h", "http://127.0.0.1:1/mcp",
                                 oauth=ambit.OAuth(redirect_uri="http://x/cb", token_store=tmp_path / "t.json"))
    assert filed._config()["oauth"]["token_file"] == str(tmp_path / "t.json")
    # The bound on the wait for the refresh guard: seconds here, milliseconds in the core.
    with pytest.raises(ambit.ConfigError, match="oauth.refresh_lock_timeout must be a positive number"):
        ambit.OAuth(redirect_uri="http://x/cb", refresh_lock_timeout=0)
    bounded = ambit.McpServer.http("h", "http://127.0.0.1:1/mcp",
                                   oauth=ambit.OAuth(redirect_uri="http://x/cb", refresh_lock_timeout=0.25))
    assert bounded._config()["oauth"]["refresh_lock_timeout_ms"] == 250
