"""A real OTLP/HTTP trace receiver for the telemetry tests (the OpenTelemetry Collector is not reachable
here): `POST /v1/traces` takes an `ExportTraceServiceRequest` in protobuf (as the core's exporter sends it,
`application/x-protobuf`), decodes it with the official `opentelemetry-proto` package and keeps its spans;
`GET /spans` returns them as JSON; `POST /reset` forgets them; `POST /check` runs check.py's check on them.

Usage: python receiver.py  -- prints `http://127.0.0.1:PORT` on its first line, then serves until killed.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

sys.path.insert(0, str(Path(__file__).resolve().parent))
import check  # noqa: E402 - the checker beside this file

SPANS: list[dict[str, Any]] = []
LOCK = threading.Lock()


def value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind) if kind else None


def decode(body: bytes) -> list[dict[str, Any]]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for rs in request.resource_spans:
        resource = {kv.key: value(kv.value) for kv in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    {
                        "trace_id": s.trace_id.hex(),
                        "span_id": s.span_id.hex(),
                        "parent_span_id": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "start": s.start_time_unix_nano,
                        "end": s.end_time_unix_nano,
                        "attributes": {kv.key: value(kv.value) for kv in s.attributes},
                        "events": [
                            {"name": e.name, "attributes": {kv.key: value(kv.value) for kv in e.attributes}}
                            for e in s.events
                        ],
                        "resource": resource,
                        "scope": ss.scope.name,
                    }
                )
    return out


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/reset":
            with LOCK:
                SPANS.clear()
            self.reply(200, b"{}", "application/json")
            return
        if self.path == "/check":
            # check.py's check of the spans held here, for a suite that cannot run Python itself (Swift's
            # root): {"scenario": <the file's JSON>, "content": true|false} -> 200, or 422 naming the difference.
            request = json.loads(body)
            scenario = request["scenario"]
            want = scenario.get("expect", {}).get("usage")
            usage = (want["input_tokens"], want["output_tokens"]) if want else None
            with LOCK:
                spans = json.loads(json.dumps(SPANS))
            try:
                n = check.check(spans, scenario["telemetry"], bool(request["content"]), usage)
            except check.CheckFailed as e:
                self.reply(422, str(e).encode(), "text/plain")
                return
            self.reply(200, f"telemetry check passed: {n} spans".encode(), "text/plain")
            return
        if self.path != "/v1/traces":
            self.reply(404, b"not found", "text/plain")
            return
        if self.headers.get("content-type") != "application/x-protobuf":
            self.reply(415, b"protobuf only", "text/plain")
            return
        try:
            spans = decode(body)
        except Exception as e:  # a body that is not an ExportTraceServiceRequest
            self.reply(400, str(e).encode(), "text/plain")
            return
        for s in spans:
            s["headers"] = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-")}
        with LOCK:
            SPANS.extend(spans)
        self.reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self) -> None:
        if self.path != "/spans":
            self.reply(404, b"not found", "text/plain")
            return
        with LOCK:
            body = json.dumps(SPANS).encode()
        self.reply(200, body, "application/json")


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
