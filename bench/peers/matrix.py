"""Prints the runners of the side-by-side benchmark as JSON for driver.py: what each runs, on which wire,
and which ratios against which peer or floor are goals (issue: at most 1/10 of the agent SDKs' CPU, at
most 1.3 times the raw client's, deferred request bytes at most 5 % of eager).

    python3 matrix.py BENCH_DIR REPO > runners.json
"""
import json
import os
import sys

bench, repo = sys.argv[1], sys.argv[2]
here = os.path.join(repo, "bench", "peers")
py = os.path.join(bench, "venv", "bin", "python")
node = "node"
node_modules = os.path.join(bench, "node", "node_modules")
rel = os.path.join(os.environ.get("CARGO_TARGET_DIR", ""), "release")
swift_pkg = os.path.join(bench, "swift-pkg")
swift_bin = os.path.join(swift_pkg, ".build", "release", "AmbitBench")
# Inside the Swift package, which is all the Swift root sees of the host.
tools500 = os.path.join(swift_pkg, "tools500.json")


def python(label, script, **kw):
    return {"label": label, "language": "Python", "argv": [py, os.path.join(here, "runners", "python", script)], **kw}


def nodejs(label, script, **kw):
    env = {"BENCH_NODE_MODULES": node_modules, "AMBIT_NODE": os.path.join(bench, "ambit-node")}
    return {"label": label, "language": "Node", "argv": [node, os.path.join(here, "runners", "node", script)],
            "env": env, **kw}


def rust(label, binary, **kw):
    return {"label": label, "language": "Rust", "argv": [os.path.join(rel, binary)], **kw}


def swift(label, **kw):
    # The Swift root runs with a clean environment: the settings go on the command line through env(1).
    argv = ["bash", os.path.join(repo, "scripts", "swift-toolchain.sh"), "run", swift_pkg, "env"] + [
        f"{k}={{{k}}}" for k in ("BENCH_BASE_URL", "BENCH_WIRE", "BENCH_STREAM", "BENCH_RUNS", "BENCH_WARMUP",
                                 "BENCH_TOOLS", "BENCH_DEFER")] + [swift_bin]
    return {"label": label, "language": "Swift", "argv": argv, **kw}


def job(group, suffix="", tools="", defer_ambit=False):
    """One group of runners; with ``tools``, every runner registers the 500 extra tools."""
    t = {"group": group, "tools": tools}
    s = suffix
    # The goals are set for the job itself; with 500 tools the ratios are for information (every client
    # must write the same 750 KB per run, so the raw floor alone is about half a peer's CPU).
    peer, floor = (None, None) if tools else (0.1, 1.3)
    cpu_py = [(f"openai-agents chat{s}", "cpu_ms", peer), (f"openai raw chat{s}", "cpu_ms", floor)]
    cpu_node = [(f"@openai/agents chat{s}", "cpu_ms", peer), (f"vercel ai chat{s}", "cpu_ms", peer),
                (f"fetch raw chat{s}", "cpu_ms", floor)]
    # `concurrent`: the runners of `--phase concurrent` (N runs in flight at once; issue 18).
    c = {"concurrent": not tools}
    out = [
        python(f"ambit-py chat{s}", "ambit_py.py", compare=cpu_py, **c, **t),
        python(f"openai-agents chat{s}", "openai_agents.py", **c, **t),
        python(f"pydantic-ai chat{s}", "peer_pydantic_ai.py", **c, **t),
        python(f"openai raw chat{s}", "openai_raw.py", **t),
        nodejs(f"ambit-node chat{s}", "ambit_node.js", compare=cpu_node, **c, **t),
        nodejs(f"@openai/agents chat{s}", "openai_agents.mjs", **c, **t),
        nodejs(f"vercel ai chat{s}", "vercel_ai.mjs", **c, **t),
        nodejs(f"fetch raw chat{s}", "raw_fetch.mjs", **t),
        rust(f"ambit-rust chat{s}", "bench-ambit-rust", compare=[(f"reqwest raw chat{s}", "cpu_ms", None),
             (f"reqwest minimal chat{s}", "cpu_ms", None)], **c, **t),
        rust(f"reqwest raw chat{s}", "bench-reqwest-raw", **t),
        # The minimal floor (issue 18, item 4): a current-thread runtime and the tools written once; and
        # ambit on the same runtime (goal: within 1.5 times the floor).
        rust(f"reqwest minimal chat{s}", "bench-reqwest-raw", env={"BENCH_MINIMAL": "1"}, **t),
        rust(f"ambit-rust chat{s} current-thread", "bench-ambit-rust", env={"BENCH_MINIMAL": "1"},
             compare=[(f"reqwest minimal chat{s}", "cpu_ms", None if tools else 1.5)], **t),
        swift(f"ambit-swift chat{s}", **t),
    ]
    if not tools:
        out += [
            python("ambit-py responses", "ambit_py.py", wire="responses",
                   compare=[("openai-agents responses", "cpu_ms", 0.1), ("openai raw responses", "cpu_ms", 1.3)], **t),
            python("openai-agents responses", "openai_agents.py", wire="responses", **t),
            python("openai raw responses", "openai_raw.py", wire="responses", **t),
            python("ambit-py chat stream", "ambit_py.py", stream=True,
                   compare=[("openai-agents chat stream", "cpu_ms", 0.1), ("openai raw chat stream", "cpu_ms", 1.3)],
                   **t),
            python("openai-agents chat stream", "openai_agents.py", stream=True, **t),
            python("openai raw chat stream", "openai_raw.py", stream=True, **t),
            python("ambit-py responses stream", "ambit_py.py", wire="responses", stream=True, **t),
            python("ambit-py anthropic", "ambit_py.py", wire="anthropic", **t),
            python("ambit-py anthropic stream", "ambit_py.py", wire="anthropic", stream=True, **t),
            nodejs("ambit-node responses", "ambit_node.js", wire="responses",
                   compare=[("@openai/agents responses", "cpu_ms", 0.1), ("fetch raw responses", "cpu_ms", 1.3)], **t),
            nodejs("@openai/agents responses", "openai_agents.mjs", wire="responses", **t),
            nodejs("fetch raw responses", "raw_fetch.mjs", wire="responses", **t),
            nodejs("ambit-node chat stream", "ambit_node.js", stream=True,
                   compare=[("fetch raw chat stream", "cpu_ms", 1.3)], **t),
            nodejs("fetch raw chat stream", "raw_fetch.mjs", stream=True, **t),
            rust("ambit-rust anthropic stream", "bench-ambit-rust", wire="anthropic", stream=True, **t),
        ]
    if defer_ambit:
        eager = {"ambit-py": f"ambit-py chat{s}", "ambit-node": f"ambit-node chat{s}",
                 "ambit-rust": f"ambit-rust chat{s}", "ambit-swift": f"ambit-swift chat{s}"}
        cmp = lambda k: [(eager[k], "bytes", 0.05)]  # noqa: E731
        out += [
            python(f"ambit-py chat{s} deferred", "ambit_py.py", defer=True, compare=cmp("ambit-py"), **t),
            nodejs(f"ambit-node chat{s} deferred", "ambit_node.js", defer=True, compare=cmp("ambit-node"), **t),
            rust(f"ambit-rust chat{s} deferred", "bench-ambit-rust", defer=True, compare=cmp("ambit-rust"), **t),
            swift(f"ambit-swift chat{s} deferred", defer=True, compare=cmp("ambit-swift"), **t),
        ]
    return out


runners = job("The weather job") + job("With 500 tools registered", " +500", tools500, defer_ambit=True)
json.dump(runners, sys.stdout, indent=1)
