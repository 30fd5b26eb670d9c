"""A small MCP server on the `mcp` package (2.x), over stdio, whose tool answers with the names of the
arguments its call carried as they arrived at the server (not what the schema lets through), so a test
can see exactly which arguments a client passed on. `exit_now` ends the process mid-call, for a test
of a server that becomes unavailable.

    python arguments_server.py
"""

import json
import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("arguments")


@server.tool()
async def show_arguments(ctx: Context, word: str = "") -> str:
    """Answers with the sorted names of the arguments this call carried."""
    params = ctx.request_context.params or {}
    arguments = params.get("arguments") or {}
    return json.dumps(sorted(arguments.keys()))


@server.tool()
async def exit_now() -> str:
    """Ends the server's process at once, without answering."""
    os._exit(0)


if __name__ == "__main__":
    server.run("stdio")
