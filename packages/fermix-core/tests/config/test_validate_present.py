"""``validate_present``: the core config validated section by section, building only the
models of the sections a file has, with a result equal to validating the whole model —
and no result at all when anything is wrong, so the full validation reports it."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from fermix_core.config.models import FermixConfig
from fermix_core.config.schema import validate_present
from pydantic import BaseModel

VALID: list[dict[str, Any]] = [
    {},
    {"fermix_core": {}},
    {"fermix_core": {"providers": {"ollama": {"primary": True, "base_url": "http://h:1/v1"}}}},
    {
        "fermix_core": {
            "profile": "work",
            "agent": {"name": "Ada", "timezone": "Europe/Paris"},
            "providers": {
                "openai": {"api_key": "@keyring", "default_model": "gpt-5"},
                "anthropic": {
                    "api_key": {"source": "env", "env": "ANTHROPIC_KEY"},
                    "reasoning_effort": "high",
                },
            },
            "tools": {"web_search": {"backend": "brave", "max_results": 7}, "tool_search": {}},
            "routing": {"subagent_model": "small"},
            "oauth": {"google": {"client_id": "id", "client_secret": "@keyring"}},
            "plugin_secrets": {"weather": "@keyring"},
            "memory": {"review_enabled": False},
        },
        "sandbox": {"mode": "strict", "allowed_roots": ["/srv/data"], "env": {"allow": ["LANG"]}},
        "mcp": {"servers": {"files": {"command": "npx", "args": ["-y", "server"]}}},
        "fermix_web": {"port": 0},
        "fermix_channels": {"telegram": {"owner_user_id": "1"}},
    },
]

INVALID: list[Any] = [
    {"fermix_core": 3},
    {"fermix_core": {"profile": ""}},
    {"fermix_core": {"agent": {"timezone": "Mars/Olympus"}}},
    {"fermix_core": {"agent": {"nmae": "typo"}}},
    {"fermix_core": {"providers": {"openai": {"primary": "yes"}}}},
    {"fermix_core": {"providers": {"openai": 5}}},
    {"fermix_core": {"plugin_secrets": {"": "@keyring"}}},
    {"sandbox": {"allowed_roots": ["relative/path"]}},
    {"mcp": {"servers": {"both": {"command": "x", "url": "https://example.org"}}}},
    {"fermix_web": {"port": 70000}},
    {"unknown_top": {}},
    [],
]


def same(a: Any, b: Any) -> None:
    """Equal values, and for models the same set fields all the way down."""
    assert type(a) is type(b)
    if isinstance(a, BaseModel):
        assert a.model_fields_set == b.model_fields_set, type(a).__name__
        for name in type(a).model_fields:
            same(getattr(a, name), getattr(b, name))
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("data", VALID)
def test_the_result_equals_validating_the_whole_model(data) -> None:
    fast = validate_present(FermixConfig, data)
    full = FermixConfig.model_validate(data)
    assert fast == full
    same(fast, full)
    assert fast.model_dump(mode="json") == full.model_dump(mode="json")


@pytest.mark.parametrize("data", INVALID)
def test_anything_invalid_gives_no_result(data) -> None:
    assert validate_present(FermixConfig, data) is None


def test_sections_that_are_absent_are_never_built() -> None:
    probe = """
import json
from fermix_core.config.models import FermixConfig
from fermix_core.config.schema import validate_present
data = {"fermix_core": {"providers": {"ollama": {"primary": True}}, "agent": {"name": "A"}}}
config = validate_present(FermixConfig, data)
assert config.fermix_core.tools.tool_search.enabled is None  # defaults are there
assert str(config.sandbox.mode) == "standard" and config.mcp.servers == {}
import fermix_core.config.models as m
built = sorted(n for n in dir(m) if isinstance(getattr(m, n), type)
               and issubclass(getattr(m, n), m.Section) and getattr(m, n).__pydantic_complete__)
print(json.dumps(built))
"""
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == '["AgentConfig", "ProviderConfig"]'
