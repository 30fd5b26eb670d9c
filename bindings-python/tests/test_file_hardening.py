"""The file tools and web_fetch under attack from Python (issue 12, items 1, 4 and 5): a file swapped for a
symlink out while the model reads and searches; FIFOs, sockets and devices; a 3 GB sparse file and an
endless HTTP body with the peak memory measured in a child process; FIFOs beside another run. Each attack
has a negative control showing the same attack succeeds the naive way."""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import ambit

SECRET = "SECRET-py-5ca1ab1e-outside"
RENAME_EXCHANGE = 2
#: Peak resident memory a child may reach with the bounded readers, far under the naive controls' peak.
PEAK_BOUND_KIB = 192 * 1024
#: The size the negative controls read whole.
CONTROL_BYTES = 256 << 20


def scenario(tmp_path: Path, turns: list[list[tuple[str, dict[str, Any]]]]) -> Path:
    """A scenario whose model asks for each turn's calls at once, then answers "done"."""
    exchanges, n = [], 0
    for calls in turns:
        tool_calls = []
        for name, args in calls:
            n += 1
            tool_calls.append({"id": f"c{n}", "name": name, "arguments": args})
        exchanges.append({"respond": {"tool_calls": tool_calls}})
    exchanges.append({"respond": {"content": "done"}})
    path = tmp_path / f"scenario-{os.getpid()}-{threading.get_ident()}-{id(turns)}.json"
    path.write_text(json.dumps({"name": "file_hardening", "wire": "openai_chat", "exchanges": exchanges}))
    return path


def agent(provider: Any, policy: ambit.Policy, names: set[str], turns: int = 1, scratchpad: bool = False) -> ambit.Agent:
    return ambit.Agent(model=ambit.OpenAIChat("m", base_url=provider.base_url, api_key="k", max_retries=0),
                       builtins=sorted(names), policy=policy, max_turns=turns + 1, scratchpad=scratchpad)


def run(start_provider: Any, tmp_path: Path, policy: ambit.Policy, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    provider = start_provider(scenario(tmp_path, [calls]))
    result = agent(provider, policy, {n for n, _ in calls}).run_sync("go")
    assert result.output == "done"
    return result.tool_calls


def failed(tool: str, message: str) -> str:
    return f"Error: tool '{tool}' failed: {message}"


def not_regular(path: str) -> str:
    return f"path '{path}' is not a regular file; the file tools open regular files only"


def outside(path: str) -> str:
    return f"path '{path}' is outside this session's reach"


libc = ctypes.CDLL(None, use_errno=True)


class Swapper:
    """A thread exchanging two paths (renameat2 RENAME_EXCHANGE) until stopped; counts its swaps."""

    def __init__(self, a: Path, b: Path) -> None:
        self.a, self.b = os.fsencode(a), os.fsencode(b)
        self.swaps, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self) -> None:
        at_fdcwd = -100
        while not self.stop.is_set():
            for _ in range(1000):
                rc = libc.renameat2(at_fdcwd, self.a, at_fdcwd, self.b, RENAME_EXCHANGE)
                assert rc == 0, os.strerror(ctypes.get_errno())
                self.swaps += 1

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        return self.swaps


def race_tree(tmp_path: Path) -> tuple[Path, Path]:
    ws, out = tmp_path / "ws", tmp_path / "outside"
    (ws / "race").mkdir(parents=True)
    out.mkdir()
    (out / "secret.txt").write_text(SECRET + "\n")
    (ws / "race" / "victim").write_text("public data\n")
    (ws / "race" / "lnk").symlink_to(out / "secret.txt")
    return ws, out


def test_a_file_swapped_with_a_symlink_out_never_leaks(start_provider: Any, tmp_path: Path) -> None:
    ws, _ = race_tree(tmp_path)
    policy = ambit.Policy(level="workspace", working_directory=ws, confine_reads=True)
    calls = [c for _ in range(25) for c in (
        ("file_read", {"path": "race/victim"}),
        ("file_search", {"pattern": "public|SECRET", "path": "race/victim"}),
        ("file_search", {"pattern": "public|SECRET", "path": "race"}),
        ("file_search", {"pattern": "public|SECRET"}),
    )]
    swapper = Swapper(ws / "race" / "victim", ws / "race" / "lnk")
    total = inside = refused = 0
    try:
        while total < 2000 or ((inside == 0 or refused == 0) and total < 20000):
            for call in run(start_provider, tmp_path, policy, calls):
                total += 1
                assert SECRET not in call.result, f"{call.name} {call.arguments} leaked: {call.result}"
                inside += "public data" in call.result
                refused += "outside this session's reach" in call.result or "no such file" in call.result
    finally:
        swaps = swapper.close()
    print(f"swap race: {total} calls, {swaps} swaps, {inside} inside, {refused} refused")
    assert swaps > 0 and inside > 0 and refused > 0


def test_negative_control_open_by_path_after_a_check_leaks_under_the_same_swapper(tmp_path: Path) -> None:
    ws, _ = race_tree(tmp_path)
    victim = ws / "race" / "victim"
    swapper = Swapper(victim, ws / "race" / "lnk")
    leaked = 0
    try:
        for _ in range(2_000_000):
            # The old way: resolve and check the path, then open it by path. (Resolving itself races
            # with the swapper and may fail; that attempt is simply over.)
            try:
                if os.path.realpath(victim).startswith(str(ws) + os.sep):
                    leaked += SECRET in victim.read_text()
            except OSError:
                pass
            if leaked:
                break
    finally:
        swapper.close()
    assert leaked, "the naive check-then-open read the secret"


def specials(tmp_path: Path) -> tuple[Path, socket.socket]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside").mkdir()
    os.mkfifo(ws / "pipe")
    os.mkfifo(ws / "pipe2")
    os.mkfifo(tmp_path / "outside" / "pipe")
    (ws / "plain.txt").write_text("plain text\n")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "sock"))
    return ws, sock


def test_special_files_are_refused_in_one_sentence_and_outside_reach_like_missing_ones(start_provider: Any,
                                                                                       tmp_path: Path) -> None:
    ws, sock = specials(tmp_path)
    confined = ambit.Policy(level="workspace", working_directory=ws, confine_reads=True)
    calls: list[tuple[str, dict[str, Any]]] = []
    for p in ["pipe", "sock", "./pipe2"]:
        calls += [("file_read", {"path": p}), ("file_search", {"pattern": "x", "path": p}),
                  ("file_edit", {"path": p, "old_text": "a", "new_text": "b"}),
                  ("file_write", {"path": p, "content": "x"})]
    calls.append(("file_read", {"path": "plain.txt"}))
    for call in run(start_provider, tmp_path, confined, calls):
        path = call.arguments["path"]
        assert call.result == ("plain text\n" if path == "plain.txt" else failed(call.name, not_regular(path)))

    calls = []
    for p in [str(tmp_path / "outside" / "pipe"), str(tmp_path / "outside" / "missing"), "../outside/pipe",
              "../outside/missing", "/dev/zero", "/dev/nonexistent"]:
        calls += [("file_read", {"path": p}), ("file_search", {"pattern": "x", "path": p}),
                  ("file_write", {"path": p, "content": "x"})]
    for call in run(start_provider, tmp_path, confined, calls):
        assert call.result == failed(call.name, outside(call.arguments["path"]))

    unconfined = ambit.Policy(level="read", working_directory=ws)
    calls = [c for p in ["/dev/zero", "/dev/urandom", "/dev/null"]
             for c in (("file_read", {"path": p}), ("file_search", {"pattern": "x", "path": p}))]
    for call in run(start_provider, tmp_path, unconfined, calls):
        assert call.result == failed(call.name, not_regular(call.arguments["path"]))
    sock.close()


def test_fifos_never_stall_another_run(start_provider: Any, tmp_path: Path) -> None:
    ws, sock = specials(tmp_path)
    policy = ambit.Policy(level="workspace", working_directory=ws, confine_reads=True)
    fifo_calls = [("file_read", {"path": "pipe"}), ("file_read", {"path": "pipe2"}),
                  ("file_edit", {"path": "pipe", "old_text": "a", "new_text": "b"}),
                  ("file_write", {"path": "pipe2", "content": "x"})]
    plain_calls = [("file_read", {"path": "plain.txt"})]
    fifos = agent(start_provider(scenario(tmp_path, [fifo_calls])), policy, {"file_read", "file_edit", "file_write"})
    plain = agent(start_provider(scenario(tmp_path, [plain_calls])), policy, {"file_read"})
    outcome: list[Any] = []

    def both() -> None:
        async def go() -> Any:
            return await asyncio.gather(fifos.run("go"), plain.run("go"))
        outcome.append(asyncio.run(go()))

    t = threading.Thread(target=both, daemon=True)
    t.start()
    t.join(300)  # A watchdog on failure only: the old code never finished.
    assert outcome, "both runs finished"
    a, b = outcome[0]
    assert b.tool_calls[0].result == "plain text\n"
    assert [c.result for c in a.tool_calls] == [failed("file_read", not_regular("pipe")),
                                                 failed("file_read", not_regular("pipe2")),
                                                 failed("file_edit", not_regular("pipe")),
                                                 failed("file_write", not_regular("pipe2"))]
    sock.close()


CHILD = r'''
import json, os, resource, subprocess, sys, threading, http.server, socketserver
sys.path[:0] = json.loads(os.environ["CHILD_PATH"])
import ambit
from conftest import Provider
mode, work = sys.argv[1], sys.argv[2]

def peak():
    print("PEAK_RSS_KIB=%d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

def scenario(calls, turns=None):
    ex = [{"respond": {"tool_calls": [{"id": "c%d" % i, "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]}}]
    for extra in turns or []:
        ex.append({"respond": {"tool_calls": [{"id": "x%d" % i, "name": n, "arguments": a} for i, (n, a) in enumerate(extra)]}})
    ex.append({"respond": {"content": "done"}})
    p = os.path.join(work, "scenario-%s.json" % mode)
    open(p, "w").write(json.dumps({"name": "child", "wire": "openai_chat", "exchanges": ex}))
    return Provider(p)

def run(calls, policy, names, turns=None, scratchpad=False):
    provider = scenario(calls, turns)
    a = ambit.Agent(model=ambit.OpenAIChat("m", base_url=provider.base_url, api_key="k", max_retries=0),
                    builtins=sorted(names), policy=policy, max_turns=2 + len(turns or []), scratchpad=scratchpad)
    r = a.run_sync("go")
    provider.close()
    return [c.result for c in r.tool_calls]

if mode == "sparse-naive":
    p = os.path.join(work, "naive.bin")
    with open(p, "wb") as f:
        f.truncate(int(os.environ["CONTROL_BYTES"]))
    assert len(open(p, "rb").read()) == int(os.environ["CONTROL_BYTES"])
    peak()
elif mode == "sparse":
    data = os.path.join(work, "data")
    os.mkdir(data)
    subprocess.run(["truncate", "-s", "3G", os.path.join(data, "big.bin")], check=True)
    policy = ambit.Policy(level="workspace", working_directory=data)
    r = run([("file_read", {"path": "big.bin"}), ("file_search", {"pattern": "x", "path": "big.bin"}),
             ("file_search", {"pattern": "x"}), ("file_read", {"path": "/dev/zero"})],
            policy, {"file_read", "file_search"})
    assert r[0].startswith("\0\0\0") and r[0].endswith(
        "[… 3220963328 more bytes of the file not shown: file_read returns at most 262144 characters; "
        "use offset and limit to read further]"), r[0][-200:]
    assert r[1] == "no matches" and r[2] == "no matches", r[1:3]
    assert "not a regular file" in r[3], r[3]
    peak()
else:
    endless = mode != "fetch-naive"
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            self.send_response(200)
            chunk = b"a" * 65536
            try:
                if endless:
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
                    while True:
                        self.wfile.write(framed)
                else:
                    n = int(os.environ["CONTROL_BYTES"])
                    self.send_header("content-length", str(n))
                    self.end_headers()
                    for _ in range(n // len(chunk)):
                        self.wfile.write(chunk)
            except OSError:
                pass
        def log_message(self, *a):
            pass
    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
    server = S(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/" % server.server_address[1]
    if not endless:
        import urllib.request
        assert len(urllib.request.urlopen(url).read()) == int(os.environ["CONTROL_BYTES"])
        peak()
    else:
        policy = ambit.Policy(level="read", working_directory=work)
        r = run([("web_fetch", {"url": url}), ("web_fetch", {"url": url, "max_length": 10**9}),
                 ("web_fetch", {"url": url, "scratchpad": "page"})], policy, {"web_fetch"},
                turns=[[("scratchpad_list", {})]], scratchpad=True)
        assert r[0].endswith("[… more of the body not shown: reading stopped after 465536 bytes, enough for max_length 100000]"), r[0][-200:]
        assert r[1].endswith("web_fetch reads at most 1 MiB of a body for an answer returned inline; "
                             "save it to the scratchpad to read up to 8 MiB]"), r[1][-200:]
        assert r[2].startswith("Saved "), r[2]
        assert r[3].startswith("page: "), r[3]
        peak()
'''


def child_peak(mode: str, tmp_path: Path) -> int:
    work = tmp_path / mode
    work.mkdir()
    tests = str(Path(__file__).resolve().parent)
    env = {**os.environ, "CHILD_PATH": json.dumps([tests]), "CONTROL_BYTES": str(CONTROL_BYTES)}
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(work)], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, f"child {mode}:\n{out.stdout}\n{out.stderr}"
    line = next(line for line in out.stdout.splitlines() if line.startswith("PEAK_RSS_KIB="))
    return int(line.split("=", 1)[1])


def test_a_3gb_sparse_file_is_read_in_bounded_memory(tmp_path: Path) -> None:
    bounded, naive = child_peak("sparse", tmp_path), child_peak("sparse-naive", tmp_path)
    print(f"peak RSS: file tools on a 3 GB sparse file {bounded} KiB; naive whole read of 256 MiB {naive} KiB")
    assert bounded < PEAK_BOUND_KIB < naive


def test_an_endless_http_body_is_fetched_in_bounded_memory(tmp_path: Path) -> None:
    bounded, naive = child_peak("fetch", tmp_path), child_peak("fetch-naive", tmp_path)
    print(f"peak RSS: web_fetch of an endless body {bounded} KiB; naive whole read of 256 MiB {naive} KiB")
    assert bounded < PEAK_BOUND_KIB < naive
