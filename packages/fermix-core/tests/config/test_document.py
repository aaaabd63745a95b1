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


# --------------------------------------------------------------------------- tomllib reads

#: Files both parsers accept, covering TOML's value kinds and table forms.
ACCEPTED = [
    '[fermix_core.agent]\nname = "Fermix"\ntimezone = "Europe/Berlin"\n',
    "a = 1\r\nb = -0.0\nc = inf\nd = 1e1000\ne = 0x1F\nf = 0o17\ng = 0b101\nh = 1_000\n",
    "big = 9223372036854775808\nt = true\nf = false\n",
    "lit = 'C:\\\\path'\nml = \"\"\"\nline one \\\n  joined\"\"\"\nmllit = '''\nraw\\n'''\n",
    'u = "\\u00e9\\U0001F600"\nq = "tab\\tquote\\""\n',
    "d = 1979-05-27\nt = 07:32:00.999999\nl = 1979-05-27T07:32:00\n",
    "z = 1979-05-27T07:32:00Z\no = 1979-05-27T07:32:00+05:30\nm = 1979-05-27 07:32:00-00:00\n",
    "a.b.c = 1\na.b.d = [1, [2, 3], {x = 1}]\n",
    "[a.b]\nx = 1\n[c]\ny = 2\n[a.d]\nz = 3\n",  # tables out of order
    "[[jobs]]\nname = 'one'\n[[jobs]]\nname = 'two'\n[jobs.when]\nat = 'noon'\n",
    '[fermix_core.providers.ollama]\nprimary = true\nbase_url = "http://127.0.0.1:11434/v1"\n',
    'list = [\n  "a",  # a comment\n  "b",\n]\n"quoted key" = 1\n\'lit key\' = 2\n',
    "",
    "# only a comment\n",
]

#: Files tomllib rejects but tomlkit accepts: their values are tomlkit's, as before.
TOMLKIT_ONLY = ["a = {b = 1,}\n", 'k = "\\e"\n']


def _docs_toml_blocks() -> list[str]:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[4]
    blocks = []
    for page in [*sorted((root / "docs").rglob("*.md")), root / "README.md"]:
        blocks += re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
    return blocks


def _same(a, b) -> bool:
    """Equal values and types (nan equals nan; time zones compare by offset)."""
    import math

    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return type(b) is list and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    if type(a) is not type(b) or a != b:
        return False
    offset = getattr(a, "utcoffset", None)  # dates and times: the same offset too
    return offset is None or offset() == b.utcoffset()


@pytest.mark.parametrize("text", ACCEPTED)
def test_read_values_equal_what_tomlkit_read(tmp_path, text: str) -> None:
    from fermix_core.config.document import plain, read_config

    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8", newline="")
    source = read_config(path)
    assert _same(source.data, tomlkit.parse(text).unwrap())
    assert _same(plain(source), plain(read_document(path)))


def test_every_toml_example_in_the_docs_reads_the_same() -> None:
    import tomllib

    blocks = _docs_toml_blocks()
    assert len(blocks) > 20
    compared = 0
    for text in blocks:
        try:
            expected = tomlkit.parse(text).unwrap()
        except Exception:  # noqa: S112 - a fragment (e.g. with "...") is not a file
            continue
        try:
            values = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            continue  # read through tomlkit, as before: covered by TOMLKIT_ONLY
        assert _same(values, expected), text
        compared += 1
    assert compared > 20


@pytest.mark.parametrize("text", TOMLKIT_ONLY)
def test_what_only_tomlkit_accepts_still_reads(tmp_path, text: str) -> None:
    from fermix_core.config.document import read_config

    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    assert read_config(path).data == tomlkit.parse(text).unwrap()


def test_a_syntax_error_is_tomlkits_and_raised_by_the_read(write_config) -> None:
    from fermix_core.config.document import read_config

    path = write_config('[fermix_core.agent]\nname = "ok"\ntimezone = "Europe/Berlin\n')
    with pytest.raises(ConfigError) as caught:
        read_config(path)
    with pytest.raises(ConfigError) as before:
        read_document(path)
    assert caught.value.problems == before.value.problems
    assert caught.value.problems[0].path.startswith(f"{path}:3:")


def test_the_document_is_parsed_from_the_same_text_on_demand(write_config) -> None:
    from fermix_core.config.document import ConfigText, plain, read_config

    path = write_config('# keep me\n[fermix_core.agent]\nname = "A"\n')
    source = read_config(path)
    path.write_text('[fermix_core.agent]\nname = "changed later"\n')
    assert source.document.as_string().startswith("# keep me\n")
    assert plain(source) == {"fermix_core": {"agent": {"name": "A"}}}
    copy = plain(source)
    copy["fermix_core"]["agent"]["name"] = "mutated"
    assert source.data["fermix_core"]["agent"]["name"] == "A"
    wrapped = ConfigText.of(tomlkit.parse("a = 1\n"))
    assert wrapped.data == {"a": 1} and ConfigText.of(wrapped) is wrapped
    assert ConfigText.of({"b": [1]}).data == {"b": [1]}
    assert read_config(path.parent / "absent.toml").document.unwrap() == {}


@pytest.mark.parametrize("key", ["a.'b.c'", 'x."y z".w', "a . b"])
def test_parse_key_agrees_with_tomlkit(key: str) -> None:
    expected = tomlkit.parse(f"{key} = 0").unwrap()
    parts = parse_key(key)
    node = expected
    for part in parts:
        node = node[part]
    assert node == 0


def test_a_read_imports_no_tomlkit() -> None:
    import subprocess
    import sys

    code = (
        "import sys, tempfile, pathlib\n"
        "from fermix_core.config.document import read_config, parse_key\n"
        "p = pathlib.Path(tempfile.mkdtemp()) / 'config.toml'\n"
        "p.write_text('[fermix_core.agent]\\nname = \"x\"\\n')\n"
        "print(read_config(p).data['fermix_core']['agent']['name'], parse_key('a.b'))\n"
        "print('tomlkit' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["x ('a', 'b')", "False"]
