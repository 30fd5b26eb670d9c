"""Runs the side-by-side benchmark: every runner in turn, interleaved (A B C ... A B C ...), against one
``ambit-bench-provider``, and prints a Markdown table of medians with min-max. ``run.sh`` prepares the
runners and calls this; see bench/peers/README.md for the protocol.

    python3 driver.py --provider BIN --runners runners.json [--rounds 3] [--runs 200] [--warmup 20]
                      [--only SUBSTRING] [--out results.json] [--markdown results.md]
                      [--phase weather|concurrent] [--concurrency 10,100,1000,10000] [--latency 0,50,500]
                      [--transport plain|tls|plain,tls]

``--phase concurrent`` (issue 18): the runners marked ``concurrent`` run N weather jobs in flight at once
in one process (``BENCH_CONCURRENCY=N``: asyncio.gather, Promise.all, tokio tasks) against a provider
that answers each model request after ``BENCH_LATENCY_MS``; for each latency, N ascending, the runners
interleaved; a runner that fails at some N is not run at larger N (the table says what stopped it).

``--transport tls`` (``run.sh --tls``): the provider serves HTTPS as the hosted APIs do (``--tls``: a CA
made at start, HTTP/2 or HTTP/1.1 by ALPN) and every runner trusts its CA the standard way for its stack
(``SSL_CERT_FILE``: Python's httpx and ambit's core; ``NODE_EXTRA_CA_CERTS``: Node). ``plain,tls`` runs
both, interleaved runner by runner; TLS rows are labelled "over TLS".
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import ssl
import tempfile
import time
import urllib.request
from typing import Any


class Provider:
    """One ``ambit-bench-provider``, plain HTTP or (``tls``) HTTPS with a CA of its own."""

    def __init__(self, binary: str, tls: bool, latency_ms: int | None = None) -> None:
        env = dict(os.environ) if latency_ms is None else dict(os.environ, BENCH_LATENCY_MS=str(latency_ms))
        self.tls = tls
        self.dir = tempfile.TemporaryDirectory(prefix="ambit-bench-")
        self.ca: str | None = os.path.join(self.dir.name, "ca.pem") if tls else None
        argv = [binary] + (["--tls", "--ca-file", self.ca] if self.ca else [])
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout is not None
        self.base_url = self.proc.stdout.readline().strip()
        if tls:
            self.proc.stdout.readline()  # ca=PATH
        self.suffix = " over TLS" if tls else ""

    def env(self) -> dict[str, str]:
        """What a runner needs to trust this provider."""
        return {"SSL_CERT_FILE": self.ca, "NODE_EXTRA_CA_CERTS": self.ca} if self.ca else {}

    def call(self, path: str, method: str = "GET") -> dict[str, Any]:
        return provider_call(self.base_url, path, method, self.ca)

    def close(self, timeout: float) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=timeout)
        self.dir.cleanup()


def provider_call(base: str, path: str, method: str = "GET", ca: str | None = None) -> dict[str, Any]:
    req = urllib.request.Request(base.removesuffix("/v1") + path, method=method, data=b"" if method == "POST" else None)
    context = ssl.create_default_context(cafile=ca) if ca else None
    with urllib.request.urlopen(req, timeout=10, context=context) as r:
        return json.loads(r.read())


def run_one(runner: dict[str, Any], prov: Provider, runs: int, warmup: int) -> dict[str, Any]:
    base_url = prov.base_url
    env = dict(os.environ, **prov.env())
    settings = {"BENCH_BASE_URL": base_url, "BENCH_WIRE": runner.get("wire", "chat"),
                "BENCH_STREAM": "1" if runner.get("stream") else "0", "BENCH_RUNS": str(runs),
                "BENCH_WARMUP": str(warmup), "BENCH_TOOLS": runner.get("tools", ""),
                "BENCH_DEFER": "1" if runner.get("defer") else "0"}
    env.update(settings)
    env.update(runner.get("env", {}))
    argv = [a.format(**settings) for a in runner["argv"]]
    prov.call("/__bench/reset", "POST")
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=runner.get("cwd"))
    assert proc.stdout is not None
    startup = None
    result = None
    for line in proc.stdout:
        line = line.strip()
        if line == "READY" and startup is None:
            startup = (time.perf_counter() - t0) * 1000
        elif line.startswith("{"):
            result = json.loads(line)
    err = proc.stderr.read() if proc.stderr else ""
    code = proc.wait()
    if code != 0 or result is None or startup is None:
        raise RuntimeError(f"{runner['label']}: exit {code}, ready={startup is not None}: {err.strip()[-2000:]}")
    stats = prov.call("/__bench/stats")
    total = warmup + runs
    if stats["requests"] != 2 * total:
        raise RuntimeError(f"{runner['label']}: the provider saw {stats['requests']} requests for {total} runs "
                           f"(2 per run expected)")
    return {"cpu_ms": result["cpu_ms"] / runs, "wall_ms": result["wall_ms"] / runs,
            "rss_mb": result["maxrss_kb"] / 1024, "startup_ms": startup, "bytes": stats["bytes"] / total}


def run_concurrent(runner: dict[str, Any], prov: Provider, n: int, latency_ms: int, warmup: int,
                   timeout: float) -> dict[str, Any]:
    base_url = prov.base_url
    env = dict(os.environ, **prov.env())
    settings = {"BENCH_BASE_URL": base_url, "BENCH_WIRE": runner.get("wire", "chat"), "BENCH_STREAM": "0",
                "BENCH_RUNS": str(n), "BENCH_WARMUP": str(warmup), "BENCH_TOOLS": "", "BENCH_DEFER": "0",
                "BENCH_CONCURRENCY": str(n)}
    env.update(settings)
    env.update(runner.get("env", {}))
    argv = [a.format(**settings) for a in runner["argv"]]
    prov.call("/__bench/reset", "POST")
    load = os.getloadavg()[0]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=runner.get("cwd"), timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout:.0f} s") from None
    except OSError as e:
        raise RuntimeError(f"cannot start: {e}") from None
    result = next((json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")), None)
    if proc.returncode != 0 or result is None:
        lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
        raise RuntimeError(f"exit {proc.returncode}: {' / '.join(lines[-3:])[-600:]}")
    stats = prov.call("/__bench/stats")
    if stats["requests"] != 2 * (warmup + n):
        raise RuntimeError(f"the provider saw {stats['requests']} requests for {warmup + n} runs")
    cpu_s = result["cpu_ms"] / 1000
    return {"n": n, "latency_ms": latency_ms, "load": load, "cpu_ms_per_run": result["cpu_ms"] / n,
            "runs_per_cpu_s": n / cpu_s if cpu_s > 0 else float("inf"), "wall_s": result["wall_ms"] / 1000,
            "rss_mb": result["maxrss_kb"] / 1024,
            "rss_kb_per_run": max(0, result["maxrss_kb"] - result["rss_before_kb"]) / n,
            "p50_over_ms": result["lat_p50_ms"] - 2 * latency_ms, "p99_over_ms": result["lat_p99_ms"] - 2 * latency_ms,
            "fds_peak": result["fds_peak"], "fds_before": result["fds_before"]}


def concurrent_phase(args: argparse.Namespace, runners: list[dict[str, Any]]) -> None:
    runners = [r for r in runners if r.get("concurrent")]
    ns = [int(x) for x in args.concurrency.split(",")]
    rows: list[tuple[dict[str, Any], dict[str, Any] | str]] = []
    started = time.time()
    for latency in [int(x) for x in args.latency.split(",")]:
        provs = [Provider(args.provider, t == "tls", latency) for t in args.transport.split(",")]
        stopped: dict[str, str] = {}
        try:
            for n in ns:
                for r0, prov in [(r, p) for r in runners for p in provs]:
                    r = dict(r0, label=r0["label"] + prov.suffix)
                    if r["label"] in stopped:
                        continue
                    try:
                        res: dict[str, Any] | str = run_concurrent(r, prov, n, latency, args.warmup, args.timeout)
                    except RuntimeError as e:
                        res = f"failed at {n:,} in flight: {e}"
                        stopped[r["label"]] = str(res)
                    rows.append((r, res if isinstance(res, str) else res))
                    if isinstance(res, str):
                        print(f"{latency} ms {n:>6} {r['label']:<24} {res}", file=sys.stderr, flush=True)
                    else:
                        print(f"{latency} ms {n:>6} {r['label']:<24} {res['runs_per_cpu_s']:9.0f} runs/CPU-s "
                              f"{res['cpu_ms_per_run']:8.3f} ms CPU/run  rss {res['rss_mb']:6.0f} MB "
                              f"({res['rss_kb_per_run']:7.1f} KB/run)  p50/p99 over {res['p50_over_ms']:7.1f}/"
                              f"{res['p99_over_ms']:7.1f} ms  fds {res['fds_peak']}  load {res['load']:.1f}",
                              file=sys.stderr, flush=True)
        finally:
            for prov in provs:
                prov.close(timeout=30)
    header = (f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} on {platform.node()}: "
              f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}; "
              f"--phase concurrent, N runs in flight at once after {args.warmup} warm-up runs, one run each, "
              f"runners interleaved at each N. Took {time.time() - started:.0f} s.")
    out = [header, "", "| latency | in flight | runner | runs per CPU-s | CPU ms/run | peak RSS MB | RSS KB per in-flight run "
           "| p50 / p99 over the model's latency ms | peak fds | load |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r, res in rows:
        if isinstance(res, str):
            continue
        out.append(f"| {res['latency_ms']} ms | {res['n']:,} | {r['label']} | {res['runs_per_cpu_s']:,.0f} | "
                   f"{res['cpu_ms_per_run']:.3f} | {res['rss_mb']:.0f} | {res['rss_kb_per_run']:.1f} | "
                   f"{res['p50_over_ms']:.1f} / {res['p99_over_ms']:.1f} | {res['fds_peak']:,} | {res['load']:.1f} |")
    fails = [(r, res) for r, res in rows if isinstance(res, str)]
    if fails:
        out += ["", "What stopped a runner:", ""]
        out += [f"- {r['label']}, {res}" for r, res in fails]
    md = "\n".join(out) + "\n"
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": header, "rows": [{"runner": r["label"], "result": res} for r, res in rows]}, f,
                      indent=1)


def spread(values: list[float], digits: int) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f}"
    return f"{med:.{digits}f} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def table(runners: list[dict[str, Any]], results: dict[str, list[dict[str, Any]]]) -> str:
    out = []
    for group in dict.fromkeys(r["group"] for r in runners):
        out.append(f"\n### {group}\n")
        out.append("| runner | language | wire | CPU ms/run | wall ms/run | peak RSS MB | start-up ms | request bytes/run |")
        out.append("|---|---|---|---|---|---|---|---|")
        for r in runners:
            if r["group"] != group or not results.get(r["label"]):
                continue
            rs = results[r["label"]]
            wire = r.get("wire", "chat") + (" stream" if r.get("stream") else "")
            out.append(f"| {r['label']} | {r['language']} | {wire} | {spread([x['cpu_ms'] for x in rs], 3)} | "
                       f"{spread([x['wall_ms'] for x in rs], 3)} | {statistics.median(x['rss_mb'] for x in rs):.0f} | "
                       f"{statistics.median(x['startup_ms'] for x in rs):.0f} | "
                       f"{statistics.median(x['bytes'] for x in rs):,.0f} |")
    return "\n".join(out)


def ratios(runners: list[dict[str, Any]], results: dict[str, list[dict[str, Any]]]) -> str:
    """The goals of the comparison: ``compare`` entries name (ambit runner, other runner, goal, metric)."""
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in results.items() if v}
    lines = ["\n### Ratios (medians of this run)\n", "| ambit runner | against | metric | ratio | goal | met |",
             "|---|---|---|---|---|---|"]
    for r in runners:
        for other, metric, goal in r.get("compare", []):
            if r["label"] not in med or other not in med:
                continue
            ratio = med[r["label"]][metric] / med[other][metric]
            if goal is None:  # for information: no goal was set for this pair
                lines.append(f"| {r['label']} | {other} | {metric} | {ratio:.3f} | — | — |")
                continue
            lines.append(f"| {r['label']} | {other} | {metric} | {ratio:.3f} | ≤ {goal} | "
                         f"{'yes' if ratio <= goal else 'NO'} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--provider", required=True)
    ap.add_argument("--runners", required=True, help="JSON list of runners (run.sh writes it)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--only", default="", help="run only runners whose label or group holds this text (A|B: either)")
    ap.add_argument("--out", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--phase", default="weather", choices=["weather", "concurrent"])
    ap.add_argument("--concurrency", default="10,100,1000,10000", help="runs in flight (--phase concurrent)")
    ap.add_argument("--latency", default="0,50,500", help="the provider's answer delays in ms (--phase concurrent)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds one concurrent runner may take")
    ap.add_argument("--transport", default="plain", help="plain, tls (HTTPS, HTTP/2 by ALPN) or plain,tls (interleaved)")
    args = ap.parse_args()
    with open(args.runners) as f:
        runners = [r for r in json.load(f) if any(o in r["label"] or o in r["group"] for o in args.only.split("|"))]
    if args.phase == "concurrent":
        if args.warmup == ap.get_default("warmup"):
            args.warmup = 3
        concurrent_phase(args, runners)
        return
    if args.transport not in ("plain", "tls"):
        ap.error("the weather phase takes --transport plain or tls")
    provider = Provider(args.provider, args.transport == "tls")
    if provider.tls:
        runners = [dict(r, label=r["label"] + provider.suffix,
                        compare=[(o + provider.suffix, m, g) for o, m, g in r.get("compare", [])]) for r in runners]
    results: dict[str, list[dict[str, Any]]] = {r["label"]: [] for r in runners}
    failures: list[str] = []
    started = time.time()
    try:
        for rnd in range(args.rounds):
            for r in runners:
                try:
                    res = run_one(r, provider, args.runs, args.warmup)
                except RuntimeError as e:
                    failures.append(f"round {rnd + 1}: {e}")
                    print(f"FAILED {e}", file=sys.stderr, flush=True)
                    continue
                results[r["label"]].append(res)
                print(f"round {rnd + 1}/{args.rounds} {r['label']:<40} cpu {res['cpu_ms']:8.3f} ms/run  "
                      f"wall {res['wall_ms']:8.3f} ms/run  rss {res['rss_mb']:6.0f} MB  "
                      f"start {res['startup_ms']:6.0f} ms  {res['bytes']:>9,.0f} B/run", file=sys.stderr, flush=True)
    finally:
        provider.close(timeout=10)
    header = (f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} on {platform.node()}: "
              f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}, "
              f"Python {platform.python_version()}; {args.rounds} interleaved rounds of {args.runs} runs after "
              f"{args.warmup} warm-up runs each; medians with min–max over rounds. "
              f"Took {time.time() - started:.0f} s.")
    md = header + "\n" + table(runners, results) + "\n" + ratios(runners, results) + "\n"
    if failures:
        md += "\nFailures:\n" + "\n".join(f"- {f}" for f in failures) + "\n"
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"header": header, "runners": runners, "results": results, "failures": failures}, f, indent=1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
