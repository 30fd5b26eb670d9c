"""A small MCP server on the `mcp` package (2.x) that adds a tool at run time and tells the client its
tool list changed: `enable_extra` registers `extra_tool`, then sends notifications/tools/list_changed
(2025-11-25) and publishes the change to `subscriptions/listen` streams (2026-07-28, where the plain
notification is dropped and `tools.listChanged` is advertised because `subscriptions/listen` is served).

    python dynamic_server.py                          # stdio
    python dynamic_server.py http PORT                # streamable HTTP on 127.0.0.1:PORT/mcp (both revisions)
    python dynamic_server.py http PORT --per-session  # the same, 2025-11-25 only: each MCP session sees
                                                      # only the tools it added, so one long-running server
                                                      # serves many runs that each start afresh
"""

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

PER_SESSION = "--per-session" in sys.argv


def session_id(request_context: Any) -> str | None:
    """The request's MCP session id (the `mcp-session-id` header; None over stdio)."""
    request = getattr(request_context, "request", None)
    return None if request is None else request.headers.get("mcp-session-id")


class DynamicServer(MCPServer):
    """With --per-session, `extra_tool` is listed only to the MCP sessions that called `enable_extra`."""

    enabled: set[str | None] = set()

    async def _handle_list_tools(self, ctx: Any, params: Any) -> Any:
        result = await super()._handle_list_tools(ctx, params)
        if PER_SESSION and session_id(ctx) not in self.enabled:
            result.tools = [t for t in result.tools if t.name != "extra_tool"]
        return result


server = DynamicServer("dynamic")


def extra_tool(word: str) -> str:
    """Echoes the word back, added at run time."""
    return f"extra: {word}"


@server.tool()
async def enable_extra(ctx: Context) -> str:
    """Adds the tool extra_tool and tells the client its tool list changed."""
    server.enabled.add(session_id(ctx.request_context))
    if server._tool_manager.get_tool("extra_tool") is None:
        server.add_tool(extra_tool)
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "extra_tool added"


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
