"""Start-up to a constructed agent: spawns a bench runner N times and times each spawn to its READY line
(imports done, the agent built; bench/peers/README.md), then kills it. The runner is given a base URL
nobody listens on: nothing after READY is measured.

    python3 bench/peers/startup.py 12 "$AMBIT_CACHE/bench/venv/bin/python" bench/peers/runners/python/ambit_py.py
"""
import os
import statistics
import subprocess
import sys
import time


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, argv = int(sys.argv[1]), sys.argv[2:]
    env = dict(os.environ, BENCH_BASE_URL="http://127.0.0.1:9/v1", BENCH_RUNS="1", BENCH_WARMUP="0")
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        assert proc.stdout is not None
        ready = any(line.strip() == "READY" for line in proc.stdout)
        if not ready:
            sys.exit(f"{argv}: ended without printing READY")
        times.append((time.perf_counter() - t0) * 1000)
        proc.kill()
        proc.wait()
    times.sort()
    print(f"{n} starts: min {times[0]:.0f} ms, median {statistics.median(times):.0f} ms, max {times[-1]:.0f} ms "
          f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
