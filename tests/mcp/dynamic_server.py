"""A small MCP server on the `mcp` package (2.x) that adds a tool at run time and sends
notifications/tools/list_changed: `enable_extra` registers `extra_tool`. Run over stdio."""

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
    return "extra_tool added"


if __name__ == "__main__":
    server.run("stdio")
