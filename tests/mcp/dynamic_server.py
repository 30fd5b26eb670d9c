"""A small MCP server on the `mcp` package (2.x) that adds a tool at run time and tells the client its
tool list changed: `enable_extra` registers `extra_tool`, then sends notifications/tools/list_changed
(2025-11-25) and publishes the change to `subscriptions/listen` streams (2026-07-28, where the plain
notification is dropped and `tools.listChanged` is advertised because `subscriptions/listen` is served).

    python dynamic_server.py              # stdio
    python dynamic_server.py http PORT    # streamable HTTP on 127.0.0.1:PORT/mcp (both revisions)
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("dynamic")


def extra_tool(word: str) -> str:
    """Echoes the word back, added at run time."""
    return f"extra: {word}"


@server.tool()
async def enable_extra(ctx: Context) -> str:
    """Adds the tool extra_tool and tells the client its tool list changed."""
    server.add_tool(extra_tool)
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "extra_tool added"


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
