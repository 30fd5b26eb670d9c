"""Runs llama.cpp's OpenAI-compatible server (the `xllamacpp` wheel) on 127.0.0.1 with one model.

Prints the base URL (`http://127.0.0.1:PORT/v1`) on one line once the model is loaded, then serves until
its standard input closes, so the server never outlives the test that started it. Sampling is greedy
(temperature 0) and one request is served at a time: the same request always gets the same answer.
The server answers at most `--max-tokens` tokens per request (default 96) when the request sets none.

Usage: python serve.py MODEL.gguf [--max-tokens N]
"""

from __future__ import annotations

import argparse
import sys

import xllamacpp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()

    params = xllamacpp.CommonParams()
    params.model.path = args.model
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
