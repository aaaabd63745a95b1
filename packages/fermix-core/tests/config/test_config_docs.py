"""docs/config.md stays in step with the models, the env overlay and the error wording."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomlkit
from fermix_core.config import CORE_FLAGS, NEVER_FROM_ENV
from fermix_core.config.models import DOCUMENTED_MODELS, OAUTH_PROVIDERS, FermixConfig

DOC = Path(__file__).resolve().parents[4] / "docs" / "config.md"


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


def sections(doc: str) -> dict[str, str]:
    """``### `[path]``` heading -> the text up to the next heading."""
    parts = re.split(r"^### `\[([^\]]+)\]`\s*$", doc, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.mark.parametrize("path", sorted(DOCUMENTED_MODELS))
def test_every_field_of_every_core_model_is_documented(doc: str, path: str) -> None:
    found = sections(doc)
    assert path in found, f"docs/config.md has no '### `[{path}]`' section"
    body = found[path]
    model = DOCUMENTED_MODELS[path]
    for name, info in model.model_fields.items():
        key = info.alias or name
        listed = f"| `{key}` |" in body or (path == "fermix_core" and f"`{key}`" in body)
        assert listed, f"[{path}] {key} is not documented in docs/config.md"


def test_documented_defaults_match_the_models(doc: str) -> None:
    found = sections(doc)
    for path, model in DOCUMENTED_MODELS.items():
        for name, info in model.model_fields.items():
            default = info.get_default(call_default_factory=True)
            if isinstance(default, bool | int | float | str) and not isinstance(default, type):
                shown = tomlkit.item(default).as_string()
                row = next(
                    (line for line in found[path].splitlines() if line.startswith(f"| `{name}` |")),
                    None,
                )
                if row is None:
                    continue
                assert f"`{shown}`" in row, f"[{path}] {name}: default {shown} not in {row!r}"


def test_every_top_level_core_section_is_covered(doc: str) -> None:
    for top in FermixConfig.model_fields:
        assert f"[{top}" in doc
    for provider in OAUTH_PROVIDERS:
        assert f"`{provider}`" in sections(doc)["fermix_core.oauth.<provider>"]


def test_env_table_lists_flags_and_the_never_read_token(doc: str) -> None:
    env_part = doc[doc.index("## Environment variables") :]
    for flag in CORE_FLAGS:
        assert f"| `{flag}` |" in env_part
    for name in NEVER_FROM_ENV:
        assert f"| `{name}` | **never read** |" in env_part
    for needed in (
        "OPENAI_API_KEY",
        "OLLAMA_BASE_URL",
        "TELEGRAM_ALLOWED_USER_IDS",
        "GEMINI_API_KEY",
    ):
        assert needed in env_part


def test_the_doc_names_the_precedence_and_the_ownership_rule(doc: str) -> None:
    assert "built-in defaults < `config.toml` < environment" in doc
    assert "last path component equals the plugin's entry-point name after its first" in doc
    assert "top-level key equals the distribution's import-style name" in doc


def test_error_examples_match_real_messages(doc: str, problems_of) -> None:
    lines = problems_of(
        '[fermix_channels.slack]\nstreaming = "fast"\n'
        "[fermix_channels.slak]\nx = 1\n"
        '[fermix_core.agent]\ntimezone = "Mars/Base"\n'
        "[fermix_core.compaction]\ntreshold = 1\n"
        "[fermix_core.providers.openai]\nprimary = true\n"
        "[fermix_core.providers.anthropic]\nprimary = true\n"
        '[fermix_core.providers.openrouter]\nreasoning_effort = "high"\n'
        "[fermix_core.providers.opnai]\n",
        environ={"OLLAMA_BASE_URL": "gpu:11434"},
    )
    block = doc[doc.index("## Errors") :]
    for line in lines:
        assert line in block, line
