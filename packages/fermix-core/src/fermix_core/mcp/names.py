"""The ``mcp_<server>_<tool>`` names: sanitised to what every provider wire accepts."""

from __future__ import annotations

import re

#: Longest tool name the strictest provider wire takes.
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    """``mcp_<server>_<tool>`` with every character outside ``[A-Za-z0-9_-]`` made ``_``,
    cut to 64 characters. Two tools that end up with one name are a collision the caller
    refuses (names are never made unique by guessing)."""
    return _UNSAFE.sub("_", f"mcp_{server}_{tool}")[:MAX_NAME]
