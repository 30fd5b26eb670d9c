"""Runs llama.cpp's OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1 with one model: the
one helper every language's real-server tests start (Rust, Python, Node, and Swift through its script).

Prints the base URL (`http://127.0.0.1:PORT/v1`) on one line once the model is loaded, then serves until
its standard input closes, so the server never outlives the test that started it. Sampling is greedy
(temperature 0) and one request is served at a time: the same request always gets the same answer.
The server answers at most `--max-tokens` tokens per request (default 96) when the request sets none.
`--tiny` serves the suite's own tiny model (tiny_model.py), written once per version of its generator
under `$AMBIT_CACHE/llama` (default `~/.cache/ambit/llama`).

Usage: python serve.py (MODEL.gguf | --tiny) [--max-tokens N]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import xllamacpp

HERE = Path(__file__).resolve().parent


def tiny_model() -> Path:
    """The tiny model, written once per version of its generator under $AMBIT_CACHE/llama."""
    source = (HERE / "tiny_model.py").read_bytes()
    cache = Path(os.environ.get("AMBIT_CACHE") or Path.home() / ".cache" / "ambit") / "llama"
    path = cache / f"tiny-{hashlib.sha256(source).hexdigest()[:16]}.gguf"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.part")
        subprocess.run([sys.executable, str(HERE / "tiny_model.py"), str(partial)], check=True,
                       stdout=subprocess.DEVNULL)
        partial.replace(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", nargs="?")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    if bool(args.model) == args.tiny:
        parser.error("give a model file or --tiny")

    params = xllamacpp.CommonParams()
    params.model.path = str(tiny_model()) if args.tiny else args.model
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # any free port; the server reports the one it took
    params.use_jinja = True  # the model's chat template, with tools
    params.n_ctx = 8192
    params.n_predict = args.max_tokens
    params.n_parallel = 1
    params.warmup = False
    params.sampling.temp = 0.0  # greedy
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)
    print(server.listening_address.rstrip("/") + "/v1", flush=True)
    sys.stdin.read()  # until the parent closes it or dies
    del server


if __name__ == "__main__":
    main()
