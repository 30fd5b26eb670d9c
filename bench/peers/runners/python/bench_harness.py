"""The measured loop every Python runner shares (bench/peers/README.md has the protocol): warm-up runs,
then the measured runs with the process's CPU (every thread), wall time and peak RSS, the checks, and
the result line. With BENCH_CONCURRENCY=N the measured runs are N at once (asyncio.gather), each timed."""
import asyncio
import json
import os
import resource
import sys
import time
from typing import Awaitable, Callable

RUNS = int(os.environ.get("BENCH_RUNS", "200"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "20"))
CONCURRENCY = int(os.environ.get("BENCH_CONCURRENCY", "0"))


def rss_kb() -> int:
    """The resident set now, from /proc (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def concurrent(name: str, run_once: Callable[[], Awaitable[str]], calls: Callable[[], int]) -> None:
    """CONCURRENCY runs in flight at once; prints the result line with per-run latencies, RSS and fds."""
    for _ in range(WARMUP):
        await run_once()
    peak_fds = fds()
    done = False

    async def sample() -> None:
        nonlocal peak_fds
        while not done:
            peak_fds = max(peak_fds, fds())
            await asyncio.sleep(0.05)

    async def timed() -> tuple[float, str]:
        t = time.perf_counter()
        out = await run_once()
        return time.perf_counter() - t, out

    rss0, fds0 = rss_kb(), fds()
    sampler = asyncio.ensure_future(sample())
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    results = await asyncio.gather(*(timed() for _ in range(CONCURRENCY)), return_exceptions=True)
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    done = True
    await sampler
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        sys.exit(f"{name}: {len(errors)} of {CONCURRENCY} runs failed; first: {errors[0]!r}")
    lat = sorted(r[0] * 1000 for r in results if not isinstance(r, BaseException))
    output = str(results[-1][1]) if not isinstance(results[-1], BaseException) else ""
    if "sunny" not in output or calls() != WARMUP + CONCURRENCY:
        sys.exit(f"{name}: wrong result: output={output!r}, tool calls={calls()}")
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    print(json.dumps({"runs": CONCURRENCY, "concurrency": CONCURRENCY, "cpu_ms": cpu * 1000,
                      "wall_ms": (t1 - t0) * 1000, "maxrss_kb": r1.ru_maxrss, "rss_before_kb": rss0,
                      "lat_p50_ms": lat[len(lat) // 2], "lat_p99_ms": lat[min(len(lat) - 1, len(lat) * 99 // 100)],
                      "fds_before": fds0, "fds_peak": peak_fds, "tool_calls": calls(), "output": output}), flush=True)


async def measure(name: str, run_once: Callable[[], Awaitable[str]], calls: Callable[[], int],
                  finish: Callable[[], None] | None = None) -> None:
    """Runs ``run_once`` WARMUP + RUNS times and prints the JSON line; exits 1 on a wrong answer or count.
    ``finish`` runs inside the measured window after the last run (telemetry's flush: exporting every
    span the measured runs made is part of their cost)."""
    if CONCURRENCY > 0:
        await concurrent(name, run_once, calls)
        return
    output = ""
    for _ in range(WARMUP):
        output = await run_once()
    if finish is not None:
        finish()  # the warm-up's spans are not the measured runs'
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(RUNS):
        output = await run_once()
    if finish is not None:
        finish()
    t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    if "sunny" not in str(output) or calls() != WARMUP + RUNS:
        sys.exit(f"{name}: wrong result: output={output!r}, tool calls={calls()}")
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    print(json.dumps({"runs": RUNS, "cpu_ms": cpu * 1000, "wall_ms": (t1 - t0) * 1000, "maxrss_kb": r1.ru_maxrss,
                      "tool_calls": calls(), "output": str(output)}), flush=True)
