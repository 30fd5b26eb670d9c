#!/usr/bin/env bash
# Builds the Python binding into a cached virtualenv and runs its pytest suite.
set -euo pipefail
source "$(dirname "$0")/python-env.sh"
cd "$here/bindings-python"
"$AMBIT_PY" -m pytest -q "$@"
