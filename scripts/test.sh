#!/usr/bin/env bash
# Every test in every language: Rust format and lints, the Rust suite, then pytest, node --test and
# swift test, each running the shared scenario files in tests/scenarios/. Slow things are cached outside
# the clone in $AMBIT_CACHE (default ~/.cache/ambit): the cargo target directory, the Python venv, the
# Swift toolchain root and SwiftPM's build directory.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
source "$here/scripts/env.sh"
cd "$here"

declare -a timings=()
step() {
  local name="$1"; shift
  local t0=$SECONDS
  echo "==> $name" >&2
  "$@"
  timings+=("$(printf '%-8s %4ss' "$name" $((SECONDS - t0)))")
}

# PostgreSQL for the work ledger's tests (they fail without it): a throwaway server, stopped at exit.
pg_dir="$(mktemp -u -d /tmp/ambit-pg.XXXXXX)"
trap 'bash "$here/scripts/postgres.sh" stop "$pg_dir"' EXIT
AMBIT_TEST_POSTGRES_URL="$(bash "$here/scripts/postgres.sh" start "$pg_dir")"
export AMBIT_TEST_POSTGRES_URL

# The MCP servers the MCP tests run against (npm and PyPI packages, cached under $AMBIT_CACHE/mcp).
step mcp bash "$here/scripts/mcp-servers.sh"
# The virtualenv with llama.cpp's server (xllamacpp): the real-server tests of every language use it.
step llamaenv bash -c 'source "$0/scripts/llama-env.sh"' "$here"
export AMBIT_PY="$AMBIT_CACHE/venv/bin/python"
step fmt cargo fmt --all --check
step clippy cargo clippy -q --workspace --all-targets -- -D warnings
# The Node addon's test build (cargo feature test-hooks, which the Node suite builds) is linted too.
step clippy-test-hooks cargo clippy -q -p ambit-node --features test-hooks --all-targets -- -D warnings
step rust cargo test -q
# Telemetry (cargo feature `otel`): the scenario files with `telemetry` exported to the OTLP receiver of
# tests/otel/ (the venv above has its opentelemetry-proto).
step rust-otel cargo test -q -p ambit-sdk --features otel --test scenarios telemetry
rust_example() {
  local out
  out="$(env -u OPENAI_API_KEY -u OPENAI_BASE_URL cargo run -q --example weather)"
  echo "$out"
  grep -q "(scripted) In Paris it is sunny and 22 °C." <<<"$out"
  # A failure prints the error's message (Display), not its Debug form: here no server listens.
  local err
  if err="$(OPENAI_BASE_URL=http://127.0.0.1:9/v1 OPENAI_API_KEY=none cargo run -q --example weather 2>&1)"; then
    echo "the example succeeded without a server" >&2; return 1
  fi
  echo "$err"
  grep -q "^error: could not reach the model provider" <<<"$err"
  ! grep -q "Transport(" <<<"$err"
}
step example rust_example
step python bash scripts/test-python.sh
step node bash scripts/test-node.sh
# The wheel and the npm tarballs, installed into fresh environments outside the tree.
step packages bash scripts/test-packages.sh
step swift bash scripts/test-swift.sh

echo "==> all suites passed" >&2
printf '  %s\n' "${timings[@]}" >&2
