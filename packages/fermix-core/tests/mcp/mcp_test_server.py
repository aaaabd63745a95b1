"""An MCP server built on the SDK's own ``MCPServer``, run as a subprocess by the tests.

``python mcp_test_server.py stdio`` or ``python mcp_test_server.py http PORT``.
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

server = MCPServer("fermix-test")


@server.tool(description="Echo the text back.")
def echo(text: str) -> str:
    return text


@server.tool(description="Add two integers; the sum is structured content.")
def add(a: int, b: int) -> dict[str, int]:
    return {"sum": a + b}


@server.tool(description="A one-pixel PNG.")
def picture() -> types.ImageContent:
    return types.ImageContent(type="image", data=PNG, mime_type="image/png")


@server.tool(description="Always fails.")
def fail() -> str:
    raise ToolError("the widget is broken")


@server.tool(description="Never answers.")
async def hang() -> str:
    await anyio.sleep_forever()
    return "unreachable"


@server.tool(description="Exit the server process at once.")
def crash() -> str:
    os._exit(3)


@server.tool(description="Print a line that is not JSON-RPC to stdout, then answer.")
def garbage() -> str:
    sys.stdout.write("this is not json\n")
    sys.stdout.flush()
    return "still here"


@server.tool(description="Print the environment variable NAME (or <unset>).")
def getenv(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(description="The HTTP request header NAME this call arrived with (or <none>).")
def header(name: str, ctx: Context) -> str:
    request = ctx.request_context.request
    if request is None:
        return "<none>"
    return request.headers.get(name, "<none>")


@server.tool(description="Register a new tool named late and announce it.")
async def grow(ctx: Context) -> str:
    def late() -> str:
        return "late tool"

    server.add_tool(late, name="late", description="Appeared after list_changed.")
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
