"""Checks the spans a receiver (receiver.py) holds against a scenario file's `telemetry` section: the
same assertions for every language's suite.

Usage: python check.py RECEIVER_URL SCENARIO_FILE --content on|off [--usage INPUT,OUTPUT]

- the run is the latest trace (by its root's start) holding an `execute_tool` span with
  `gen_ai.tool.call.id` = `select_call_id` (earlier runs and other runs of the process export beside it);
- every expected span (`spans[]`) is in that trace with its name, its kind, its parent (the span
  matched for the `parent` id; `null`: the trace's root) and its attributes (equal), `present` ones
  there, `absent` ones not;
- `--usage` (default: the scenario's `expect.usage`): the run's usage as the host got it: the root
  span's token counts equal it;
- contents (`content`: attributes per span id): there with `--content on`, in no span with `off`;
  `content_contains`: with `on`, those attributes contain these texts (the redacted marker);
- `secrets`: no attribute of any span of the trace holds one of these values, either way.
Exits 1 naming the first difference. The receiver runs the same check for a suite that cannot run Python
(`POST /check`, receiver.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from typing import Any

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


class CheckFailed(Exception):
    """The first difference between the spans and the scenario's `telemetry` section."""


def fail(message: str) -> None:
    raise CheckFailed(f"telemetry check failed: {message}")


def check(spans: list[dict[str, Any]], telemetry: dict[str, Any], content: bool, usage: tuple[int, int] | None) -> int:
    call_id = telemetry["select_call_id"]
    traces = {
        s["trace_id"]
        for s in spans
        if s["attributes"].get("gen_ai.operation.name") == "execute_tool"
        and s["attributes"].get("gen_ai.tool.call.id") == call_id
    }
    if not traces:
        fail(f"no trace holds the call {call_id!r} (of {len(spans)} spans received)")
    # The latest run: its root span started last.
    roots = [s for s in spans if s["trace_id"] in traces and s["parent_span_id"] in ("", "0" * 16)]
    if not roots:
        fail(f"the traces holding the call {call_id!r} have no root span")
    latest = max(roots, key=lambda s: s["start"])["trace_id"]
    trace = [s for s in spans if s["trace_id"] == latest]
    by_id = {s["span_id"]: s for s in trace}
    matched: dict[str, dict[str, Any]] = {}
    for want in telemetry["spans"]:
        parent = want.get("parent")
        candidates = []
        for s in trace:
            if s["name"] != want["name"] or s in matched.values():
                continue
            if parent is None and s["parent_span_id"] not in ("", "0" * 16):
                continue
            if parent is not None and s["parent_span_id"] != matched[parent]["span_id"]:
                continue
            if all(s["attributes"].get(k) == v for k, v in want.get("attributes", {}).items()):
                candidates.append(s)
        if not candidates:
            same = [
                {"parent": by_id.get(s["parent_span_id"], {}).get("name"), "attributes": s["attributes"]}
                for s in trace
                if s["name"] == want["name"]
            ]
            fail(f"no span {want['id']!r} ({want['name']!r} under {parent!r}, {want.get('attributes')}); spans of that name: {json.dumps(same)}")
        s = candidates[0]
        if "kind" in want and KINDS.get(s["kind"]) != want["kind"]:
            fail(f"span {want['id']!r} is of kind {KINDS.get(s['kind'])}, expected {want['kind']}")
        for k in want.get("present", []):
            if s["attributes"].get(k) in (None, ""):
                fail(f"span {want['id']!r} has no {k!r}: {s['attributes']}")
        for k in want.get("absent", []):
            if k in s["attributes"]:
                fail(f"span {want['id']!r} has {k!r} = {s['attributes'][k]!r}")
        matched[want["id"]] = s
    root = matched[telemetry["spans"][0]["id"]]
    if usage is not None:
        got = (root["attributes"].get("gen_ai.usage.input_tokens"), root["attributes"].get("gen_ai.usage.output_tokens"))
        if got != usage:
            fail(f"the run span's tokens are {got}, the run's usage {usage}")
    every = {k for keys in telemetry.get("content", {}).values() for k in keys}
    for span_id, keys in telemetry.get("content", {}).items():
        s = matched[span_id]
        for k in keys:
            if content and not s["attributes"].get(k):
                fail(f"record_content is on and span {span_id!r} has no {k!r}")
    if not content:
        for s in trace:
            found = every & set(s["attributes"])
            if found:
                fail(f"record_content is off and span {s['name']!r} holds {sorted(found)}")
    else:
        for span_id, texts in telemetry.get("content_contains", {}).items():
            for k, text in texts.items():
                if text not in str(matched[span_id]["attributes"].get(k)):
                    fail(f"span {span_id!r}'s {k!r} does not contain {text!r}: {matched[span_id]['attributes'].get(k)!r}")
    for secret in telemetry.get("secrets", []):
        for s in trace:
            if secret in json.dumps(s["attributes"]) or secret in json.dumps(s["events"]):
                fail(f"span {s['name']!r} holds the credential value {secret!r}")
    return len(trace)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("receiver")
    parser.add_argument("scenario")
    parser.add_argument("--content", choices=["on", "off"], required=True)
    parser.add_argument("--usage")
    args = parser.parse_args()
    with open(args.scenario) as f:
        scenario = json.load(f)
    telemetry = scenario["telemetry"]
    with urllib.request.urlopen(f"{args.receiver}/spans") as r:
        spans = json.load(r)
    want = scenario.get("expect", {}).get("usage")
    usage = (want["input_tokens"], want["output_tokens"]) if want else None
    if args.usage:
        i, o = args.usage.split(",")
        usage = (int(i), int(o))
    try:
        n = check(spans, telemetry, args.content == "on", usage)
    except CheckFailed as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    print(f"telemetry check passed: {n} spans")


if __name__ == "__main__":
    main()
