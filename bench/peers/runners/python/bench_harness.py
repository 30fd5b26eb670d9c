"""The measured loop every Python runner shares (bench/peers/README.md has the protocol): warm-up runs,
then the measured runs with the process's CPU (every thread), wall time and peak RSS, the checks, and
the result line."""
import json
import os
import resource
import sys
import time
from typing import Awaitable, Callable

RUNS = int(os.environ.get("BENCH_RUNS", "200"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "20"))


async def measure(name: str, run_once: Callable[[], Awaitable[str]], calls: Callable[[], int]) -> None:
    """Runs ``run_once`` WARMUP + RUNS times and prints the JSON line; exits 1 on a wrong answer or count."""
    output = ""
    for _ in range(WARMUP):
        output = await run_once()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(RUNS):
        output = await run_once()
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    if "sunny" not in str(output) or calls() != WARMUP + RUNS:
        sys.exit(f"{name}: wrong result: output={output!r}, tool calls={calls()}")
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    print(json.dumps({"runs": RUNS, "cpu_ms": cpu * 1000, "wall_ms": (t1 - t0) * 1000, "maxrss_kb": r1.ru_maxrss,
                      "tool_calls": calls(), "output": str(output)}), flush=True)
