#!/usr/bin/env bash
# The demo: the Python weather agent. A real model when OPENAI_API_KEY or OPENAI_BASE_URL is set,
# else the loopback provider with scripted answers.
set -euo pipefail
source "$(dirname "$0")/python-env.sh"
exec "$AMBIT_PY" "$here/examples/python/weather.py" "$@"
