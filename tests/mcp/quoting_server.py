"""An HTTP "MCP server" that refuses every request with 401, its body quoting the request's headers: the
server a credential must reach as a header and whose failure must reach the model redacted.

    python quoting_server.py            # prints its URL (…/mcp); serves until its stdin closes
    python quoting_server.py --forever  # serves until killed

`GET /seen` answers the headers of every request it refused, as a JSON list of objects (names lowercase).
The Python, Node and Swift suites use it to check the bindings' MCP credential settings (the core's own
suite has the same server in Rust, core/tests/credentials_mcp.rs)."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

seen: list[dict[str, str]] = []
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path != "/seen":
            self.refuse()
            return
        with lock:
            body = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.refuse()

    do_DELETE = do_POST

    def refuse(self) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        with lock:
            seen.append(headers)
        body = json.dumps({"error": "unauthorized", "you_sent": headers}).encode()
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/mcp", flush=True)
    if "--forever" in sys.argv:
        threading.Event().wait()
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
