"""Writes: value parsing, validation before writing, comment preservation, atomicity."""

from __future__ import annotations

import os
import stat

import pytest
import tomlkit
from fermix_core.config import (
    ConfigError,
    ConfigKeyError,
    get_value,
    render_config,
    set_value,
    unset_value,
)
from fermix_core.config.writer import masked_value, parse_value, write_document

RICH = """\
# Fermix configuration — hand edited, please keep my notes.
#
#   (blank-ish comment block above on purpose)

[fermix_core]
profile = "general"      # keyring namespace; do NOT change casually

# ---- who am I ----
[fermix_core.agent]
name = "fermix"   # shown in IDENTITY.md
timezone   =   "Europe/Berlin"
  user_name = 'Ada'  # indented on purpose


[fermix_core.providers.openai]
primary = true
# key lives in the keyring
api_key = "@keyring"
default_model = "gpt-5.5"

[fermix_core.providers.anthropic] # fallback
api_key = "@keyring"

[sandbox]
mode = "standard"
allowed_roots = [
  "/srv/code",   # work
  "/srv/notes",  # notes
]

# trailing comment at the end of the file
"""


def test_set_changes_one_line_and_keeps_everything_else_byte_for_byte(
    home, registry, write_config
) -> None:
    path = write_config(RICH)
    change = set_value(home, "fermix_core.agent.timezone", "America/Chicago", registry, environ={})
    assert change.changed
    assert change.describe() == ('fermix_core.agent.timezone: "Europe/Berlin" -> "America/Chicago"')
    after = path.read_text()
    assert after == RICH.replace(
        'timezone   =   "Europe/Berlin"', 'timezone   =   "America/Chicago"'
    )


def test_set_keeps_an_inline_comment_on_the_changed_line(home, registry, write_config) -> None:
    path = write_config(RICH)
    set_value(home, "fermix_core.agent.name", "Jarvis", registry, environ={})
    assert path.read_text() == RICH.replace('name = "fermix"   #', 'name = "Jarvis"   #')


def test_set_adds_a_key_to_an_existing_table_only(home, registry, write_config) -> None:
    path = write_config(RICH)
    set_value(
        home,
        "fermix_core.providers.anthropic.default_model",
        "claude-opus-4.6",
        registry,
        environ={},
    )
    after = path.read_text()
    before_lines = RICH.splitlines()
    after_lines = after.splitlines()
    added = [line for line in after_lines if line not in before_lines]
    assert added == ['default_model = "claude-opus-4.6"']
    assert (
        after_lines.index('default_model = "claude-opus-4.6"')
        == after_lines.index("[fermix_core.providers.anthropic] # fallback") + 2
    )
    assert [line for line in after_lines if line != added[0]] == before_lines


def test_set_creates_missing_tables_as_normal_sections_next_to_siblings(
    home, registry, write_config
) -> None:
    path = write_config(RICH)
    set_value(home, "fermix_core.compaction.threshold", "0.7", registry, environ={})
    after = path.read_text()
    anchor = '[fermix_core.providers.anthropic] # fallback\napi_key = "@keyring"\n\n'
    assert after == RICH.replace(anchor, anchor + "[fermix_core.compaction]\nthreshold = 0.7\n\n")
    assert tomlkit.parse(after).unwrap()["fermix_core"]["compaction"] == {"threshold": 0.7}
    # A second key lands inside the new table, not after the blank line.
    set_value(home, "fermix_core.compaction.enabled", "false", registry, environ={})
    assert (
        "[fermix_core.compaction]\nthreshold = 0.7\nenabled = false\n\n[sandbox]"
        in path.read_text()
    )


def test_new_tables_at_the_end_keep_the_files_final_newline(home, registry, write_config) -> None:
    path = write_config(RICH)
    set_value(home, "mcp.servers.x.url", "https://mcp.example.com", registry, environ={})
    set_value(
        home,
        "mcp.servers.x.headers",
        '{ Authorization = { source = "env", env = "TOKEN" } }',
        registry,
        environ={},
    )
    assert path.read_text() == RICH + (
        '\n[mcp.servers.x]\nurl = "https://mcp.example.com"\nheaders = { Authorization = '
        '{ source = "env", env = "TOKEN" } }\n'
    )


def test_set_into_an_empty_home_creates_a_private_file(home, registry) -> None:
    assert not home.path.exists()
    change = set_value(
        home, "mcp.servers.files.command", '["npx", "-y", "server-fs"]', registry, environ={}
    )
    assert change.changed
    assert change.old is None
    assert (
        home.config_file.read_text()
        == '[mcp.servers.files]\ncommand = ["npx", "-y", "server-fs"]\n'
    )
    assert stat.S_IMODE(home.config_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.path.stat().st_mode) == 0o700


def test_new_top_level_tables_get_a_blank_line(home, registry, write_config) -> None:
    path = write_config('[fermix_core.agent]\nname = "x"')  # no trailing newline
    set_value(home, "sandbox.mode", "strict", registry, environ={})
    assert path.read_text() == '[fermix_core.agent]\nname = "x"\n\n[sandbox]\nmode = "strict"\n'


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("3", 3),
        ("0.5", 0.5),
        ('["a", "b"]', ["a", "b"]),
        ('"quoted text"', "quoted text"),
        ("plain text", "plain text"),
        ("@keyring", "@keyring"),
        ('{ source = "env", env = "X" }', {"source": "env", "env": "X"}),
        ("a = 1\nb = 2", "a = 1\nb = 2"),
    ],
)
def test_parse_value(raw, expected, registry) -> None:
    assert parse_value(raw, ("unknown", "key"), registry) == expected


def test_string_keys_keep_the_text_as_typed(home, registry, write_config) -> None:
    assert parse_value("007", ("fermix_core", "agent", "name"), registry) == "007"
    assert parse_value("true", ("fermix_core", "agent", "user_name"), registry) == "true"
    assert (
        parse_value("123456", ("fermix_core", "providers", "openai", "api_key"), registry)
        == "123456"
    )
    assert parse_value("20", ("fermix_core", "tools", "web_search", "max_results"), registry) == 20
    assert parse_value("1", ("fermix_core", "compaction", "threshold"), registry) == 1
    assert parse_value("false", ("fermix_channels", "slack", "enabled"), registry) is False
    write_config("")
    set_value(home, "fermix_core.agent.name", "007", registry, environ={})
    assert 'name = "007"' in home.config_file.read_text()


def test_an_invalid_change_is_refused_and_the_file_is_untouched(
    home, registry, write_config
) -> None:
    path = write_config(RICH)
    mtime = path.stat().st_mtime_ns
    cases = [
        (
            "fermix_core.compaction.threshold",
            "2",
            "fermix_core.compaction.threshold: must be at most 1.0 (got 2)",
        ),
        (
            "fermix_core.agent.nmae",
            "x",
            'fermix_core.agent.nmae: unknown key (did you mean "name"?)',
        ),
        (
            "fermix_core.providers.openrouter.reasoning_effort",
            "high",
            "fermix_core.providers.openrouter.reasoning_effort: not allowed for this provider",
        ),
        (
            "fermix_core.providers.anthropic.primary",
            "true",
            "fermix_core.providers: more than one provider has primary = true (anthropic, openai); "
            "keep it on exactly one",
        ),
        (
            "fermix_channels.slack.streaming",
            "fast",
            'must be one of "off", "draft", "block" (got "fast")',
        ),
        ("fermix_core.agent.name.first", "x", "fermix_core.agent.name: holds a value, not a table"),
    ]
    for key, raw, message in cases:
        with pytest.raises(ConfigError) as caught:
            set_value(home, key, raw, registry, environ={})
        assert message in str(caught.value), (key, str(caught.value))
        assert path.read_text() == RICH
        assert path.stat().st_mtime_ns == mtime


def test_a_broken_file_can_be_repaired_one_key_at_a_time(home, registry, write_config) -> None:
    path = write_config('[fermix_core.compaction]\nthreshold = 5\n[sandbox]\nmode = "wide"\n')
    change = set_value(home, "sandbox.mode", "strict", registry, environ={})
    assert change.changed
    assert [str(p) for p in change.remaining] == [
        "fermix_core.compaction.threshold: must be at most 1.0 (got 5)"
    ]
    assert 'mode = "strict"' in path.read_text()
    with pytest.raises(ConfigError):  # a change that adds a problem is still refused
        set_value(home, "sandbox.command_profile", "huge", registry, environ={})
    change = unset_value(home, "fermix_core.compaction.threshold", registry, environ={})
    assert change.remaining == []


def test_unset_removes_a_key_or_a_table(home, registry, write_config) -> None:
    path = write_config(RICH)
    change = unset_value(home, "fermix_core.providers.openai.default_model", registry, environ={})
    assert (
        change.describe() == 'fermix_core.providers.openai.default_model: removed (was "gpt-5.5")'
    )
    assert path.read_text() == RICH.replace('default_model = "gpt-5.5"\n', "")
    unset_value(home, "fermix_core.providers.anthropic", registry, environ={})
    text = path.read_text()
    assert "anthropic" not in text
    assert "# trailing comment at the end of the file" in text
    again = unset_value(home, "fermix_core.providers.anthropic", registry, environ={})
    assert not again.changed
    assert again.describe() == "fermix_core.providers.anthropic: was not set"


def test_setting_the_same_value_does_not_rewrite(home, registry, write_config) -> None:
    path = write_config(RICH)
    mtime = path.stat().st_mtime_ns
    change = set_value(home, "sandbox.mode", "standard", registry, environ={})
    assert not change.changed
    assert change.describe() == "sandbox.mode: unchanged"
    assert path.stat().st_mtime_ns == mtime


def test_secret_changes_never_carry_printable_values(
    home, registry, write_config, fermix_home
) -> None:
    write_config(RICH)
    change = set_value(
        home, "fermix_core.providers.openai.api_key", "sk-live-123", registry, environ={}
    )
    assert change.secret
    assert change.describe() == "fermix_core.providers.openai.api_key: secret set (value not shown)"
    assert "sk-live-123" not in change.describe()
    table = set_value(
        home, "fermix_core.providers.openrouter", '{ api_key = "sk-or-999" }', registry, environ={}
    )
    assert table.secret
    assert "sk-or-999" not in table.describe()
    slack = set_value(home, "fermix_channels.slack.bot_token", "xoxb-1", registry, environ={})
    assert slack.secret
    plugin = set_value(home, "fermix_core.plugin_secrets.notion", "ntn_1", registry, environ={})
    assert plugin.secret
    removed = unset_value(home, "fermix_core.providers.openai.api_key", registry, environ={})
    assert (
        removed.describe()
        == "fermix_core.providers.openai.api_key: secret removed (value not shown)"
    )
    assert not set_value(home, "fermix_core.agent.name", "x", registry, environ={}).secret


def test_errors_for_a_secret_key_do_not_echo_the_value(home, registry, write_config) -> None:
    write_config("")
    with pytest.raises(ConfigError) as caught:
        set_value(
            home, "fermix_core.providers.openai.api_key", "@notkeyring-sk-123", registry, environ={}
        )
    assert "sk-123" not in str(caught.value)


def test_the_change_reports_an_env_override(home, registry, write_config) -> None:
    write_config("")
    change = set_value(
        home,
        "fermix_core.providers.openai.api_key",
        "@keyring",
        registry,
        environ={"OPENAI_API_KEY": "sk"},
    )
    assert change.overridden_by == "OPENAI_API_KEY"


def test_bad_keys_are_typed_errors(home, registry) -> None:
    with pytest.raises(ConfigKeyError):
        set_value(home, "a..b", "1", registry, environ={})
    assert not home.config_file.exists()


def test_a_failed_replace_leaves_the_old_file(home, registry, write_config, monkeypatch) -> None:
    path = write_config(RICH)

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        set_value(home, "sandbox.mode", "strict", registry, environ={})
    assert path.read_text() == RICH
    # No temp file left behind (loading may have made the derived-data cache directory,
    # whose own write failed the same way and left nothing in it either).
    assert sorted(p.name for p in home.path.iterdir() if p.name != "cache") == ["config.toml"]
    cache = home.path / "cache"
    assert (list(cache.iterdir()) if cache.exists() else []) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores directory modes")
def test_a_read_only_home_leaves_the_old_file(home, registry, write_config) -> None:
    path = write_config(RICH)
    home.path.chmod(0o500)
    try:
        with pytest.raises(PermissionError):
            set_value(home, "sandbox.mode", "strict", registry, environ={})
    finally:
        home.path.chmod(0o700)
    assert path.read_text() == RICH


def test_write_document_is_atomic_and_private(home) -> None:
    doc = tomlkit.parse("# note\n[sandbox]\nmode = 'open'\n")
    path = write_document(home, doc)
    assert path.read_text() == "# note\n[sandbox]\nmode = 'open'\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_get_value_and_render(load) -> None:
    loaded = load(
        '[fermix_core.providers.openai]\napi_key = "sk-plain"\n'
        '[fermix_core.providers.ollama]\nbase_url = "http://gpu:11434/v1"\n'
    )
    assert get_value(loaded, "fermix_core.compaction.threshold") == 0.85
    assert get_value(loaded, "fermix_core.providers.openai.api_key") == "sk-plain"
    assert masked_value(loaded, "fermix_core.providers.openai.api_key") == "********"
    assert masked_value(loaded, "fermix_core.providers.openai") == {
        "primary": False,
        "default_model": None,
        "base_url": None,
        "api_key": "********",
        "reasoning_effort": None,
        "auth_mode": None,
        "fast": False,
        "wire": None,
    }
    # A provider shows only the keys it accepts.
    assert render_config(loaded)["fermix_core"]["providers"]["ollama"] == {
        "primary": False,
        "default_model": None,
        "base_url": "http://gpu:11434/v1",
    }
    assert get_value(loaded, "fermix_weather.units") == "metric"  # plugin defaults are effective
    with pytest.raises(ConfigKeyError) as caught:
        get_value(loaded, "fermix_core.compaction.treshold")
    assert str(caught.value) == (
        "fermix_core.compaction.treshold: no such setting (did you mean "
        '"fermix_core.compaction.threshold"?)'
    )
    with pytest.raises(ConfigKeyError, match="is a value, not a table"):
        get_value(loaded, "fermix_core.profile.x")
