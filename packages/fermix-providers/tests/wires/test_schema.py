"""Odd JSON Schema from real MCP servers, made portable on every provider wire."""

from __future__ import annotations

import copy
import json

import pytest
from fermix_core.messages import ToolDefinition
from fermix_core.provider import ProviderSettings
from fermix_core.specs import ModelInfo, ProviderSpec
from fermix_providers.wires.anthropic_messages import ToolNames, _tool
from fermix_providers.wires.chat_completions import ChatCompletionsProvider
from fermix_providers.wires.responses import function_tools
from fermix_providers.wires.schema import portable_schema

#: What servers publish: refs into $defs (one recursive), anyOf with a null branch,
#: nested schemas without a type, additionalProperties both ways, a dangling ref.
ODD = {
    "type": "object",
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$defs": {
        "Point": {"type": "object", "properties": {"x": {"type": "number"}}},
        "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}},
    },
    "definitions": {"Tag": {"type": "string", "enum": ["a", "b"]}},
    "properties": {
        "at": {"$ref": "#/$defs/Point", "description": "where"},
        "tree": {"$ref": "#/$defs/Node"},
        "tag": {"anyOf": [{"$ref": "#/definitions/Tag"}, {"type": "null"}]},
        "anything": {"description": "no type at all"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "strict": {"type": "object", "additionalProperties": False},
        "remote": {"$ref": "https://example.com/schema.json"},
    },
    "required": ["at"],
}

PORTABLE = {
    "type": "object",
    "properties": {
        "at": {
            "type": "object",
            "properties": {"x": {"type": "number"}},
            "description": "where",
        },
        "tree": {
            "type": "object",
            "properties": {"child": {"type": "object"}},
        },
        "tag": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
        "anything": {"description": "no type at all"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "strict": {"type": "object", "additionalProperties": False},
        "remote": {},
    },
    "required": ["at"],
}


def odd_tool() -> ToolDefinition:
    return ToolDefinition(name="mcp_srv_odd", description="odd", parameters=copy.deepcopy(ODD))


def refs_in(value) -> list[str]:
    text = json.dumps(value)
    return [key for key in ("$ref", "$defs", "definitions", "$schema") if key in text]


def test_portable_schema_inlines_refs_and_keeps_the_rest() -> None:
    original = copy.deepcopy(ODD)
    assert portable_schema(ODD) == PORTABLE
    assert original == ODD  # not mutated


def test_missing_top_level_type_and_properties_are_added() -> None:
    assert portable_schema({}) == {"type": "object", "properties": {}}
    assert portable_schema({"properties": {"a": {}}}) == {
        "properties": {"a": {}},
        "type": "object",
    }


def test_responses_wire() -> None:
    [wire] = function_tools([odd_tool()])
    assert wire["parameters"] == PORTABLE and not refs_in(wire)


def test_chat_completions_wire() -> None:
    spec = ProviderSpec(
        name="gateway",
        factory="fermix_providers.wires.chat_completions:ChatCompletionsProvider",
        default_model="m",
        models=(ModelInfo("m", 8_000),),
    )
    adapter = ChatCompletionsProvider(
        spec, ProviderSettings(name="gateway", base_url="http://127.0.0.1:9", api_key="k")
    )
    wire = adapter.encode_tool(odd_tool())
    assert wire["function"]["parameters"] == PORTABLE and not refs_in(wire)


@pytest.mark.parametrize("prefix", ["", "mcp_"])
def test_anthropic_messages_wire(prefix: str) -> None:
    wire = _tool(odd_tool(), ToolNames(prefix) if prefix else ToolNames())
    assert wire["input_schema"] == PORTABLE and not refs_in(wire)
