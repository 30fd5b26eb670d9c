"""Starts fresh OAuth test servers (tests/mcp/oauth_server.py) on request, for a suite that cannot start
processes itself (Swift's, inside its root without this Python): each run of an `oauth` scenario gets a
server of its own, with the scenario's flags, so the server's counters are the run's alone.

    python oauth_launcher.py   # prints its URL; serves until killed (its servers stop with it)

`POST /start` with `{"args": [...]}` starts `oauth_server.py ARGS...` and answers `{"url": <its MCP URL>}`;
`POST /stop` with `{"url": ...}` stops that one. Listens on 127.0.0.1 only."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERVER = Path(__file__).with_name("oauth_server.py")
started: dict[str, subprocess.Popen[str]] = {}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        if self.path == "/start":
            args = [str(a) for a in body.get("args", [])]
            # Its stdin is a pipe from here: when this process ends, the server's stdin closes and it stops.
            p = subprocess.Popen([sys.executable, str(SERVER), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True)
            assert p.stdout is not None
            url = p.stdout.readline().strip()
            if not url:
                self.answer(500, {"error": f"oauth_server.py {args} printed no URL (exit {p.poll()})"})
                return
            with lock:
                started[url] = p
            self.answer(200, {"url": url})
        elif self.path == "/stop":
            with lock:
                p = started.pop(body.get("url", ""), None)
            if p is not None:
                p.kill()
                p.wait()
            self.answer(200, {"stopped": p is not None})
        else:
            self.answer(404, {"error": "no such route"})

    def answer(self, status: int, value: dict[str, object]) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    def stop(*_: object) -> None:
        with lock:
            for p in started.values():
                p.kill()
        sys.exit(0)

    signal.signal(signal.SIGTERM, stop)
    print(f"http://127.0.0.1:{httpd.server_address[1]}", flush=True)
    try:
        httpd.serve_forever()
    finally:
        stop()


if __name__ == "__main__":
    main()
