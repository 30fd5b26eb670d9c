"""The cost of one call from Python into ambit's Rust core and back (goal: 2 µs or less).

Times `ambit.wire_name("get_weather")`: a synchronous binding function that crosses into the core
(ambit::tools::wire_name::wire_name), converts a str each way and returns. The name is already
wire-safe, so the core's own work is a scan of 11 characters and a copy: what is left is the binding.
`task_cancelled(0)` (an int in, a bool out, a lookup in the core) and an empty Python function are
timed beside it for scale.

    PYTHONPATH=... python bench/peers/binding_call.py      # imports `ambit` as it finds it

Prints one JSON line: {"python_ns_per_call": ..., "function": ..., ...}.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import ambit
from ambit import _native

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
TARGET_S = float(os.environ.get("BENCH_SECONDS", "0.3"))  # per round


def per_call(fn, arg) -> tuple[float, int]:
    """Median ns per call over ROUNDS rounds of about TARGET_S seconds each; the loop is unrolled 10x."""
    n = 1000
    while True:  # size a round
        t = time.perf_counter_ns()
        for _ in range(n):
            fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg)
        dt = time.perf_counter_ns() - t
        if dt > 50_000_000:
            break
        n *= 4
    n = max(1, int(n * TARGET_S * 1e9 / dt))
    rounds = []
    for _ in range(ROUNDS):
        t = time.perf_counter_ns()
        for _ in range(n):
            fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg); fn(arg)
        rounds.append((time.perf_counter_ns() - t) / (n * 10))
    return statistics.median(rounds), n * 10 * ROUNDS


def main() -> None:
    assert ambit.wire_name("get_weather") == "get_weather"

    def empty(_: object) -> None:
        return None

    wire, calls = per_call(ambit.wire_name, "get_weather")
    cancelled, _ = per_call(_native.task_cancelled, 0)
    baseline, _ = per_call(empty, 0)
    print(f"ambit.wire_name('get_weather'): {wire:.1f} ns/call ({calls} calls)", file=sys.stderr)
    print(f"_native.task_cancelled(0):      {cancelled:.1f} ns/call", file=sys.stderr)
    print(f"an empty Python function:       {baseline:.1f} ns/call", file=sys.stderr)
    print(json.dumps({
        "python_ns_per_call": round(wire, 1),
        "function": "ambit.wire_name('get_weather')",
        "calls": calls,
        "task_cancelled_ns_per_call": round(cancelled, 1),
        "empty_python_function_ns_per_call": round(baseline, 1),
        "module": _native.__file__,
        "python": sys.version.split()[0],
    }))


if __name__ == "__main__":
    main()
