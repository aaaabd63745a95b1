"""The daemon's ``mcp.*`` control methods: what ``fermix mcp`` calls over the socket."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["control_handlers"]

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def control_handlers(manager: Callable[[], Any], error: type[Exception]) -> dict[str, Handler]:
    """``{method: handler}``; *error* is the server's ``MethodError(code, message)``."""

    def runner(params: dict[str, Any]) -> Any:
        name = params.get("name")
        if not isinstance(name, str) or not name:
            raise error("bad_params", "name must be a non-empty string")
        current = manager()
        if current is None:
            raise error("not_found", f"no MCP server named {name!r}: none is configured")
        try:
            return current.runner(name)
        except KeyError as exc:
            raise error("not_found", str(exc.args[0])) from None

    async def list_(params: dict[str, Any]) -> dict[str, Any]:
        current = manager()
        return {"servers": current.status() if current is not None else []}

    async def tools(params: dict[str, Any]) -> dict[str, Any]:
        found = runner(params)
        listed = [
            {
                "name": name,
                "remote": tool.remote_name,
                "description": tool.spec.description,
                "input_schema": tool.schema,
            }
            for name, tool in sorted(found.tools.items())
        ]
        return {**found.status(), "tools": listed}

    async def restart(params: dict[str, Any]) -> dict[str, Any]:
        found = runner(params)
        if found.state in ("disabled", "unavailable"):
            raise error("not_running", f"MCP server {found.name!r} is {found.state}: {found.error}")
        found.restart()
        return {"name": found.name, "restarting": True}

    return {"mcp.list": list_, "mcp.tools": tools, "mcp.restart": restart}
