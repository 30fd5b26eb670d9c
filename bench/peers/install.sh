#!/usr/bin/env bash
# Installs the peer SDKs of the side-by-side benchmark outside the clone, at pinned exact versions:
#   $AMBIT_CACHE/bench/venv   Python 3.11 venv: openai-agents, pydantic-ai-slim[openai], openai
#   $AMBIT_CACHE/bench/node   npm project: @openai/agents, openai, ai, @ai-sdk/openai-compatible, zod
# Idempotent: a stamp file in each location records the pinned set; a matching stamp skips the install.
# Prints two lines on stdout, `venv=<dir>` and `node=<dir>` (progress goes to stderr).
set -euo pipefail
source "$(dirname "$0")/../../scripts/env.sh"

PY_PINS="openai-agents==0.24.0 pydantic-ai-slim[openai]==2.68.0 openai==3.57.0"
NODE_DEPS='"@openai/agents": "0.20.0", "openai": "7.59.0", "ai": "7.0.173", "@ai-sdk/openai-compatible": "3.0.92", "zod": "4.6.7"'

root="$AMBIT_CACHE/bench"
venv="$root/venv"
node="$root/node"
mkdir -p "$root"

if [ "$(cat "$venv/.bench-stamp" 2>/dev/null)" != "$PY_PINS" ]; then
  python="${BENCH_PYTHON:-$(command -v python3.11 || command -v python3)}"
  echo "install.sh: creating $venv with $python" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install --quiet --disable-pip-version-check $PY_PINS >&2
  printf '%s' "$PY_PINS" > "$venv/.bench-stamp"
fi

if [ "$(cat "$node/.bench-stamp" 2>/dev/null)" != "$NODE_DEPS" ] || [ ! -d "$node/node_modules" ]; then
  echo "install.sh: installing npm packages in $node" >&2
  mkdir -p "$node"
  cat > "$node/package.json" <<EOF
{
  "name": "ambit-bench-peers",
  "private": true,
  "type": "module",
  "dependencies": { $NODE_DEPS }
}
EOF
  (cd "$node" && npm install --silent --no-audit --no-fund --save-exact >&2)
  printf '%s' "$NODE_DEPS" > "$node/.bench-stamp"
fi

echo "venv=$venv"
echo "node=$node"
