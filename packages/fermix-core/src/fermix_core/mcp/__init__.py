"""Outbound MCP: the operator's ``[mcp.servers.<name>]`` servers, their tools as run-time tools.

``McpManager`` (``manager``) supervises one session per enabled server in the service's task
group; each server's tools register in the capability registry as ``mcp_<server>_<tool>``
(``names``), deferred and operator-only, and run through ``McpTool`` (``tool``). The
official ``mcp`` SDK (the ``fermix-agent[mcp]`` extra) speaks the protocol; it is imported
only when a server is configured. See docs/mcp.md.
"""

from __future__ import annotations

from fermix_core.mcp.names import tool_name

__all__ = ["tool_name"]
