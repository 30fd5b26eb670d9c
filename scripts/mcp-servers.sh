#!/usr/bin/env bash
# Installs the MCP servers the MCP tests run against, outside the clone under $AMBIT_CACHE/mcp, and
# prints the directory. Idempotent: a second run with everything in place only checks.
#   npm:  @modelcontextprotocol/server-everything, @modelcontextprotocol/server-filesystem (pinned: the
#         scenario tests/scenarios/mcp_deferred_tools.json checks server-everything's catalog text)
#   PyPI: mcp (2.x) in its own virtualenv, for the Python server in tests/mcp/
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$here/scripts/env.sh"
dir="$AMBIT_CACHE/mcp"
mkdir -p "$dir/npm"
npm_version="2026.8.31"
stamp="$dir/npm/.installed-$npm_version"
if [ ! -f "$stamp" ]; then
  (cd "$dir/npm" && [ -f package.json ] || echo '{"name":"ambit-mcp-servers","private":true}' > "$dir/npm/package.json")
  npm install --prefix "$dir/npm" --no-audit --no-fund --silent --save-exact \
    "@modelcontextprotocol/server-everything@$npm_version" "@modelcontextprotocol/server-filesystem@$npm_version" >&2
  touch "$stamp"
fi
venv="$dir/venv"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import mcp.server.mcpserver' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "mcp>=2,<3" >&2
fi
echo "$dir"
