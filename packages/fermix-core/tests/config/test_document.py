"""Reading config.toml: syntax errors, unreadable files, dotted keys, the pre-plugin read."""

from __future__ import annotations

import os

import pytest
import tomlkit
from fermix_core.config import ConfigError, ConfigKeyError, format_key, parse_key, plugins_disabled
from fermix_core.config.document import read_document


def test_missing_file_is_an_empty_document(tmp_path) -> None:
    doc = read_document(tmp_path / "nope.toml")
    assert doc.unwrap() == {}


def test_toml_syntax_errors_name_file_line_and_column(home, registry, write_config) -> None:
    from fermix_core.config import load_config

    path = write_config('[fermix_core.agent]\nname = "ok"\ntimezone = "Europe/Berlin\n')
    with pytest.raises(ConfigError) as caught:
        load_config(home, registry, environ={})
    (problem,) = caught.value.problems
    assert problem.path.startswith(f"{path}:3:")
    assert problem.message.startswith("invalid TOML at line 3, column ")
    assert "run `fermix config validate`" in problem.message
    assert caught.value.file == path


def test_duplicate_keys_are_syntax_errors(write_config, home) -> None:
    path = write_config("[fermix_core]\nprofile = 'a'\nprofile = 'b'\n")
    with pytest.raises(ConfigError) as caught:
        read_document(path)
    assert 'Key "profile" already exists' in str(caught.value)
    assert caught.value.problems[0].path == f"{path}:3"
    assert caught.value.problems[0].message.startswith("invalid TOML at line 3: ")


def test_non_utf8_file(write_config, home) -> None:
    home.ensure()
    home.config_file.write_bytes(b'[fermix_core]\nprofile = "\xff"\n')
    with pytest.raises(ConfigError, match="is not UTF-8 text"):
        read_document(home.config_file)


def test_a_directory_where_the_file_should_be(home) -> None:
    home.config_file.mkdir(parents=True)
    with pytest.raises(ConfigError, match="is a directory, not a file"):
        read_document(home.config_file)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads anything")
def test_an_unreadable_file_says_how_to_fix_it(write_config) -> None:
    path = write_config("")
    path.chmod(0)
    try:
        with pytest.raises(ConfigError, match=r"permission denied\); fix with `chmod 600"):
            read_document(path)
    finally:
        path.chmod(0o600)


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("fermix_core.agent.name", ("fermix_core", "agent", "name")),
        (
            ' fermix_core . plugin_secrets . "tools.weather" ',
            ("fermix_core", "plugin_secrets", "tools.weather"),
        ),
        ("mcp.servers.my-server.url", ("mcp", "servers", "my-server", "url")),
        ("a.'b c'", ("a", "b c")),
    ],
)
def test_parse_key(key: str, parts: tuple[str, ...]) -> None:
    assert parse_key(key) == parts


@pytest.mark.parametrize(
    "key", ["", "a..b", "a.b =", "a = 1", "a.\nb", "[a]", "a.b.", '"unterminated']
)
def test_parse_key_rejects_non_keys(key: str) -> None:
    with pytest.raises(ConfigKeyError, match="is not a dotted key"):
        parse_key(key)


def test_format_key_quotes_what_needs_quoting() -> None:
    assert format_key(("mcp", "servers", "a.b", "url")) == 'mcp.servers."a.b".url'
    assert format_key(("sandbox", "allowed_roots", 2)) == "sandbox.allowed_roots[2]"
    assert format_key(("fermix_core", "plugin_secrets", "")) == 'fermix_core.plugin_secrets.""'


def test_plugins_disabled_reads_the_raw_document() -> None:
    doc = tomlkit.parse(
        '[fermix_core.plugins]\ndisabled = ["channels.slack", " fermix-weather "]\n'
    )
    assert plugins_disabled(doc) == ["channels.slack", "fermix-weather"]
    assert plugins_disabled(tomlkit.parse("")) == []
    assert plugins_disabled({"fermix_core": {"agent": {}}}) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[fermix_core.plugins]\ndisabled = "channels.slack"',
            "fermix_core.plugins.disabled: must be a list",
        ),
        (
            '[fermix_core.plugins]\ndisabled = ["ok", 3, ""]',
            "fermix_core.plugins.disabled[1]: must be a non-empty",
        ),
        ("[fermix_core]\nplugins = 5", "fermix_core.plugins: must be a table"),
        ("fermix_core = 5", "fermix_core: must be a table"),
    ],
)
def test_plugins_disabled_fails_loud_on_a_wrong_shape(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        plugins_disabled(tomlkit.parse(text))
    assert str(caught.value).startswith(message)


def test_plugins_disabled_lists_every_bad_entry() -> None:
    with pytest.raises(ConfigError) as caught:
        plugins_disabled(tomlkit.parse('[fermix_core.plugins]\ndisabled = ["ok", 3, ""]'))
    assert [p.path for p in caught.value.problems] == [
        "fermix_core.plugins.disabled[1]",
        "fermix_core.plugins.disabled[2]",
    ]


def test_the_early_read_does_not_import_pydantic() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tomlkit\n"
        "from fermix_core.config import plugins_disabled\n"
        "print(plugins_disabled(tomlkit.parse('[fermix_core.plugins]\\ndisabled = [\"x\"]')))\n"
        "print('pydantic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["['x']", "False"]
