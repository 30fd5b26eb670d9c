#!/usr/bin/env bash
# Builds the Node binding (debug) and the loopback provider, then runs the Node suite (node --test).
# Idempotent; runs from anywhere. Needs Node >= 20, npm and Rust.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=env.sh
source "$ROOT/scripts/env.sh"

cd "$ROOT/bindings-node"
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund
else
  npm install --no-audit --no-fund
fi
# The test build: the addon with its test-only hooks (cargo feature test-hooks).
npm run build:test
(cd "$ROOT" && cargo build -p ambit-test-provider)
# The virtualenv with llama.cpp's server for tests/llama.test.js (sets AMBIT_PY).
source "$ROOT/scripts/llama-env.sh"
export AMBIT_PROVIDER="$CARGO_TARGET_DIR/debug/ambit-provider"
# The tests' scratch files go to a directory of this run's own, removed when it ends (os.tmpdir(),
# tempfile and FileManager all read TMPDIR), so no run leaves anything in /tmp.
scratch="$(mktemp -d "${TMPDIR:-/tmp}/ambit-tests.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"
node --test tests/
