#!/usr/bin/env bash
# Builds the Python binding into a cached virtualenv, checks it with mypy --strict and runs its pytest suite.
set -euo pipefail
source "$(dirname "$0")/python-env.sh"
cd "$here/bindings-python"
# The package's typed API: mypy --strict over it (and the stub of the native module) must be clean.
"$AMBIT_PY" -m mypy --strict python/ambit ../examples/python tests/test_stream_closing.py tests/test_sync_twins.py
# The stub of the native module against the module built above: every name, signature and type the
# stub declares exists as declared, and nothing public is missing from it.
"$AMBIT_PY" -m mypy.stubtest ambit._native
# The tests' scratch files go to a directory of this run's own, removed when it ends (os.tmpdir(),
# tempfile and FileManager all read TMPDIR), so no run leaves anything in /tmp.
scratch="$(mktemp -d "${TMPDIR:-/tmp}/ambit-tests.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"
"$AMBIT_PY" -m pytest -q "$@"
