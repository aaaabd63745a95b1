"""``McpTool``: one server tool as a fermix tool; MCP results as tool outputs."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fermix_core.messages import ImagePart, Part, TextPart, ToolDefinition
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Tool, ToolContext, ToolOutput

if TYPE_CHECKING:
    from fermix_core.mcp.manager import ServerRunner

_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def _unbuildable(spec: ToolSpec) -> Tool[Any]:
    raise TypeError(f"{spec.name} is registered at run time by its MCP server")


def object_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The server's input schema, with ``type: object`` at the top (some servers omit it)."""
    if not schema:
        return dict(_EMPTY_SCHEMA)
    result = dict(schema)
    if result.get("type") != "object":
        result["type"] = "object"
    return result


class McpTool(Tool[Any]):
    """A tool of a connected MCP server; arguments are checked by the server, not pydantic."""

    def __init__(self, name: str, remote: Any, server: ServerRunner) -> None:
        description = (remote.description or remote.title or "").strip()
        label = f"[MCP server {server.name}, tool {remote.name}]"
        spec = ToolSpec(
            name=name,
            description=f"{description}\n\n{label}" if description else label,
            factory=_unbuildable,
            policy=PolicyClass.EXTERNAL_API,
            owner_only=True,
            read_only=False,
            deferred=True,
            failure_modes=(
                f"the MCP server {server.name!r} is not connected (fermix mcp list)",
                f"the call takes longer than {server.config.timeout_seconds:g} s",
            ),
        )
        super().__init__(spec)
        self.remote_name: str = remote.name
        self.server = server
        self.schema = object_schema(remote.input_schema)

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=self.name, description=self.spec.description, parameters=self.schema
        )

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:  # pragma: no cover
        raise NotImplementedError  # invoke() is overridden: there is no pydantic model

    async def invoke(self, raw_args: Any, ctx: ToolContext) -> ToolOutput:
        if raw_args is None:
            raw_args = {}
        if not isinstance(raw_args, Mapping):
            return ToolOutput.error(
                f"invalid arguments for tool {self.name!r}: expected a JSON object, "
                f"got {type(raw_args).__name__}"
            )
        return await self.server.call(self.remote_name, dict(raw_args), tool=self.name)


def to_output(result: Any) -> ToolOutput:
    """An MCP ``CallToolResult`` as a tool output: text and images as parts, structured
    content as JSON text (when nothing else says it) and in ``data["structured"]``;
    ``isError`` makes it an error the model reads."""
    parts: list[Part] = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(TextPart(text=item.text))
        elif kind == "image":
            parts.append(_image(item))
        elif kind == "resource":
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(TextPart(text=text if text is not None else f"[resource {resource.uri}]"))
        elif kind == "resource_link":
            parts.append(TextPart(text=f"[resource {item.uri}] {item.name}"))
        else:
            parts.append(TextPart(text=f"[{kind or 'unknown'} content omitted]"))
    data: dict[str, Any] = {}
    structured = getattr(result, "structured_content", None)
    if structured is not None:
        data["structured"] = structured
        if not any(isinstance(p, TextPart) and p.text for p in parts):
            parts.append(TextPart(text=json.dumps(structured, ensure_ascii=False)))
    if not parts:
        parts.append(TextPart(text="(the tool returned no content)"))
    return ToolOutput(content=parts, is_error=bool(result.is_error), data=data)


def _image(item: Any) -> Part:
    try:
        raw = base64.b64decode(item.data, validate=True)
        return ImagePart(media_type=item.mime_type, data=raw)
    except (binascii.Error, ValueError):
        return TextPart(text=f"[an image of type {item.mime_type!r} that could not be decoded]")
