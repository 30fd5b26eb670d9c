"""Issue 12 items 9 and 11 from Python: claim tokens a stranger cannot guess, and link-local addresses
under network remote. Each attack comes with a control that shows it would be seen if it worked."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

import ambit
from ambit.ledger import Ledger, NotClaimed

from conftest import Provider


def scripted_calls(tmp_path: Path, calls: list[tuple[str, dict[str, Any]]], name: str = "attack") -> Path:
    """A scenario whose model makes `calls` in one turn, then answers "done"."""
    scenario = {
        "name": name,
        "wire": "openai_chat",
        "exchanges": [
            {"respond": {"tool_calls": [{"id": f"c{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]}},
            {"respond": {"content": "done"}},
        ],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(scenario))
    return path


def run_calls(tmp_path: Path, calls: list[tuple[str, dict[str, Any]]], *, builtins: list[str],
              policy: ambit.Policy, name: str = "attack") -> list[ambit.ToolCall]:
    provider = Provider(scripted_calls(tmp_path, calls, name))
    try:
        model = ambit.OpenAIChat("gpt-4.1", base_url=provider.base_url, api_key="sk-test")
        agent = ambit.Agent(model=model, builtins=builtins, policy=policy)
        result = agent.run_sync("go")
        assert result.output == "done"
        return result.tool_calls
    finally:
        provider.close()


class RawServer:
    """An HTTP server on 127.0.0.1 answering every request with the same raw bytes."""

    def __init__(self, body: bytes, content_type: str) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.payload = (f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {len(body)}\r\n"
                        "connection: close\r\n\r\n").encode() + body
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                data = b""
                try:
                    while b"\r\n\r\n" not in data:
                        data += conn.recv(65536)
                    head, _, rest = data.partition(b"\r\n\r\n")
                    length = next((int(l.split(b":")[1]) for l in head.split(b"\r\n")
                                   if l.lower().startswith(b"content-length:")), 0)
                    while len(rest) < length:
                        rest += conn.recv(65536)
                    conn.sendall(self.payload)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


# --- The ledger (item 9) -------------------------------------------------------------------------

def test_a_stranger_cannot_guess_a_claim_token(tmp_path: Path) -> None:
    async def main() -> None:
        ledger = await Ledger.open(f"sqlite://{tmp_path}/ledger.db")
        claim = await ledger.claim("po", ["PO-1"], limit=1, run_id="owner")
        token = claim["PO-1"].token
        for guess in [*range(0, 50), token + 1, token - 1]:
            with pytest.raises(NotClaimed) as info:
                await ledger.record("po", [{"subject_key": "PO-1", "outcome": "released", "token": guess}])
            assert "no claim of it carries this token" in str(info.value)
        # Control: the owner's token records.
        await ledger.record("po", [{"subject_key": "PO-1", "outcome": "empty", "token": token}], run_id="owner")
    asyncio.run(main())


# --- Link-local addresses (item 11) --------------------------------------------------------------

def test_web_fetch_under_remote_refuses_link_local_unless_named(tmp_path: Path) -> None:
    server = RawServer(b"hello from loopback", "text/plain")
    local = f"http://127.0.0.1:{server.port}/"
    try:
        refused = run_calls(tmp_path, [("web_fetch", {"url": "http://169.254.169.254/latest/meta-data/"}),
                                       ("web_fetch", {"url": "http://[fe80::1]/"}),
                                       ("web_fetch", {"url": local})],
                            builtins=["web_fetch"], policy=ambit.Policy(level="read", network="remote"),
                            name="link_local")
        assert all(c.is_error for c in refused), [c.result for c in refused]
        assert "link-local" in refused[0].result and "link-local" in refused[1].result
        # Control: naming this machine's address lets the same fetch through.
        named = ambit.Policy(level="read", network="remote", allow_local_addresses=["127.0.0.1"])
        (ok,) = run_calls(tmp_path, [("web_fetch", {"url": local})], builtins=["web_fetch"], policy=named,
                          name="named")
        assert not ok.is_error and "hello from loopback" in ok.result, ok.result
        with pytest.raises(ambit.ConfigError, match="allow_local_addresses: 'metadata' is not an IP address"):
            ambit.Agent(model="gpt-4.1", builtins=["web_fetch"],
                        policy=ambit.Policy(level="read", network="remote", allow_local_addresses=["metadata"]))
    finally:
        server.close()


# --- Scope: a readable directory is never written ------------------------------------------------

def test_a_readable_directory_inside_the_workspace_is_refused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "ro").mkdir(parents=True)
    (tmp_path / "beside").mkdir()
    # Found by an attack from outside: file_write, file_edit and the shell wrote into ws/ro.
    with pytest.raises(ambit.ConfigError, match="lies inside the workspace root .* is never written"):
        ambit.Agent(model="gpt-4.1", builtins=["file_write"],
                    policy=ambit.Policy(level="workspace", working_directory=ws, readable_directories=[ws / "ro"]))
    # Control: one beside the workspace is accepted.
    ambit.Agent(model="gpt-4.1", builtins=["file_write"],
                policy=ambit.Policy(level="workspace", working_directory=ws, readable_directories=[tmp_path / "beside"]))
