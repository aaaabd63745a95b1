"""docs/writing-plugins.md builds plugins that actually work.

The page marks every file of the ``fermix-weather`` project with ``<!-- file: PATH -->``
before its code block. These tests extract those blocks, write them into a scratch project,
install it as a real (fake-installed) distribution — a ``.dist-info`` with the entry points
the page's ``pyproject.toml`` declares — and then check what the page promises: the tool,
provider and channel plugins load through discovery and register their specs without
importing their implementation modules, pass their own tests (fermix-core's
``ToolContract``, ``ProviderContract`` and ``ChannelContract`` included), show up in
``fermix plugins list``, and — configured as the page's ``config.toml`` says — answer a
message posted to the relay channel of a real daemon. An edit to the page that breaks any of
that fails here.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
import tomlkit
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import ChannelSpec, ConfigSectionSpec, PolicyClass, ProviderSpec, ToolSpec
from fermix_core.testing import FakeDistribution, fake_distribution
from fermix_core.testing.loopback import RecordedRequest, Reply, ThreadedLoopback

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "writing-plugins.md"
DOC_NAME = "docs/writing-plugins.md"
PLUGIN_NAME = "tools.weather"
PLUGINS = {
    "tools.weather": "fermix_weather.plugin",
    "providers.almanac": "fermix_weather.almanac_plugin",
    "channels.relay": "fermix_weather.relay_plugin",
}
DISTRIBUTION = "fermix-weather"
FERMIX = shutil.which("fermix", path=os.path.dirname(sys.executable)) or "fermix"

FILE_MARK_RE = re.compile(r"^<!--\s*file:\s*(?P<path>\S+)\s*-->\s*$")
#: ``<!-- config: config.toml -->``, ``<!-- request: relay -->`` … before a block.
BLOCK_MARK_RE = re.compile(r"^<!--\s*(?P<kind>config|request|reply):\s*(?P<name>\S+)\s*-->\s*$")
FENCE_OPEN_RE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")

EXPECTED_FILES = {
    "pyproject.toml",
    "src/fermix_weather/__init__.py",
    "src/fermix_weather/config.py",
    "src/fermix_weather/tool.py",
    "src/fermix_weather/plugin.py",
    "src/fermix_weather/almanac.py",
    "src/fermix_weather/almanac_plugin.py",
    "src/fermix_weather/relay.py",
    "src/fermix_weather/relay_plugin.py",
    "tests/test_weather.py",
    "tests/test_almanac.py",
    "tests/test_relay.py",
}
#: Implementation modules that collecting specs must not import.
HEAVY_MODULES = ("fermix_weather.tool", "fermix_weather.almanac", "fermix_weather.relay")


class WalkthroughError(ValueError):
    """The page's file markers or code blocks are malformed."""


def extract_files(markdown: str) -> dict[str, str]:
    """Map each ``<!-- file: PATH -->`` marker to the fenced block right after it."""
    lines = markdown.splitlines()
    files: dict[str, str] = {}
    index = 0
    while index < len(lines):
        mark = FILE_MARK_RE.match(lines[index].strip())
        index += 1
        if not mark:
            continue
        path = mark.group("path")
        if path.startswith("/") or ".." in Path(path).parts:
            raise WalkthroughError(f"{DOC_NAME}: file marker {path!r} must be a relative path")
        if path in files:
            raise WalkthroughError(f"{DOC_NAME}: {path!r} is marked twice; keep one block per file")
        if index >= len(lines) or not FENCE_OPEN_RE.match(lines[index].strip()):
            raise WalkthroughError(
                f"{DOC_NAME}: the marker for {path!r} must be followed directly by a ``` block"
            )
        body: list[str] = []
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            body.append(lines[index])
            index += 1
        if index >= len(lines):
            raise WalkthroughError(f"{DOC_NAME}: the block for {path!r} is never closed")
        index += 1
        files[path] = "\n".join(body) + "\n"
    return files


def marked_block(markdown: str, kind: str, name: str) -> str:
    """The fenced block right after ``<!-- kind: name -->`` (its body, verbatim)."""
    lines = markdown.splitlines()
    for index, line in enumerate(lines):
        mark = BLOCK_MARK_RE.match(line.strip())
        if not mark or (mark["kind"], mark["name"]) != (kind, name):
            continue
        if index + 1 >= len(lines) or not FENCE_OPEN_RE.match(lines[index + 1].strip()):
            raise WalkthroughError(f"{DOC_NAME}: <!-- {kind}: {name} --> must precede a block")
        body = []
        for text in lines[index + 2 :]:
            if text.strip() == "```":
                return "\n".join(body) + "\n"
            body.append(text)
        raise WalkthroughError(f"{DOC_NAME}: the {kind} block {name!r} is never closed")
    raise WalkthroughError(f"{DOC_NAME}: no <!-- {kind}: {name} --> block")


def console_rows(markdown: str, command: str) -> list[list[str]]:
    """Whitespace-split output lines of the ``console`` block that runs *command*."""
    rows: list[list[str]] = []
    inside = capture = False
    for line in markdown.splitlines():
        stripped = line.strip()
        if not inside and stripped == "```console":
            inside, capture = True, False
        elif inside and stripped == "```":
            inside = False
        elif inside and stripped.startswith("$ "):
            capture = stripped == f"$ {command}"
        elif inside and capture:
            rows.append(stripped.split())
    return rows


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def doc_text() -> str:
    assert DOC.is_file(), f"{DOC} is missing"
    return DOC.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def doc_files(doc_text: str) -> dict[str, str]:
    return extract_files(doc_text)


@pytest.fixture(scope="module")
def pyproject(doc_files: dict[str, str]) -> dict:
    return tomllib.loads(doc_files["pyproject.toml"])


@pytest.fixture
def project(tmp_path: Path, doc_files: dict[str, str]) -> Path:
    """The walkthrough's project tree, written from the page."""
    root = tmp_path / "fermix-weather"
    for rel, text in doc_files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (root / "README.md").write_text("# fermix-weather\n", encoding="utf-8")
    return root


def _install(
    base: Path, doc_files: dict[str, str], pyproject: dict, **rename: str
) -> FakeDistribution:
    """Fake-install the project: its src/ modules plus a .dist-info from its pyproject."""
    meta = pyproject["project"]
    modules = {
        rel.removeprefix("src/"): text
        for rel, text in doc_files.items()
        if rel.startswith("src/") and rel.endswith(".py")
    }
    return fake_distribution(
        base,
        rename.get("name", meta["name"]),
        meta["version"],
        entry_points=rename.get("entry_points") or meta["entry-points"]["fermix"],
        modules=rename.get("modules") or modules,
    )


@pytest.fixture
def installed(
    tmp_path: Path, doc_files: dict[str, str], pyproject: dict
) -> Iterator[FakeDistribution]:
    dist = _install(tmp_path / "site", doc_files, pyproject)
    with dist.activate():
        yield dist


def _subprocess_env(dist: FakeDistribution, home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FERMIX_", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(dist.path), env.get("PYTHONPATH")]))
    env["FERMIX_HOME"] = str(home)
    env["PYTHON_KEYRING_BACKEND"] = "fermix_core.keyring_backend.MemoryKeyring"
    env.update(extra)
    return env


# --------------------------------------------------------------------------- the page itself


def test_the_page_marks_every_file_of_the_project(doc_files: dict[str, str]) -> None:
    missing = EXPECTED_FILES - set(doc_files)
    assert not missing, f"{DOC_NAME} lost the file marker for {sorted(missing)}"
    for rel, text in doc_files.items():
        if rel.endswith(".py"):
            compile(text, rel, "exec")  # a syntax error names the file and line


def test_the_pyproject_declares_the_entry_point_and_a_core_range(
    pyproject: dict, doc_text: str
) -> None:
    meta = pyproject["project"]
    assert meta["name"] == "fermix-weather"
    assert meta["entry-points"]["fermix"] == PLUGINS
    assert "fermix-core>=0.1,<0.2" in meta["dependencies"]
    assert "build-backend" in pyproject["build-system"]
    # The commands that produce this file are on the page too.
    assert "$ uv init --lib fermix-weather" in doc_text
    assert '"fermix-core>=0.1,<0.2"' in doc_text


def _console_commands(doc_text: str) -> list[str]:
    """The ``$ `` lines of the page's first console block (section 1, the project)."""
    block = re.search(r"```console\n(.*?)```", doc_text, flags=re.DOTALL)
    assert block, "section 1 lost its console block"
    return [line[2:] for line in block.group(1).splitlines() if line.startswith("$ ")]


def test_the_pages_install_commands_produce_its_pyproject(
    tmp_path: Path, doc_text: str, pyproject: dict
) -> None:
    """Run section 1's commands as written; only the clone's location is the real one.

    ``UV_OFFLINE``/``UV_FROZEN`` keep uv off the network (it edits pyproject.toml but neither
    resolves nor installs), so the test checks what the commands write, on any machine.
    """
    import shlex
    import shutil

    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH")
    clone = tmp_path / "fermix"
    clone.mkdir()
    (clone / "packages").symlink_to(REPO / "packages")
    env = {**os.environ, "UV_OFFLINE": "1", "UV_FROZEN": "1", "UV_NO_PROGRESS": "1"}
    env.pop("VIRTUAL_ENV", None)
    cwd = tmp_path
    commands = _console_commands(doc_text)
    assert commands[0] == "uv init --lib fermix-weather"
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "cd":
            cwd = cwd / argv[1]
            continue
        assert argv[0] == "uv", f"section 1 runs only uv commands, not {command!r}"
        done = subprocess.run(
            [uv, *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"{command}: {done.stderr}"
    written = tomllib.loads((cwd / "pyproject.toml").read_text())
    assert written["project"]["dependencies"] == pyproject["project"]["dependencies"]
    assert written["dependency-groups"] == pyproject["dependency-groups"]
    assert written["build-system"]["build-backend"] == pyproject["build-system"]["build-backend"]
    assert written["tool"]["uv"]["sources"] == pyproject["tool"]["uv"]["sources"]
    [(name, source)] = written["tool"]["uv"]["sources"].items()
    assert name == "fermix-core" and source["editable"] is True
    assert (cwd / source["path"]).resolve() == (REPO / "packages/fermix-core").resolve()


@pytest.mark.parametrize("module", sorted(PLUGINS.values()))
def test_registration_modules_import_nothing_heavy(doc_files: dict[str, str], module: str) -> None:
    plugin = doc_files[f"src/{module.replace('.', '/')}.py"]
    imported = set(re.findall(r"^(?:from|import)\s+([\w.]+)", plugin, flags=re.MULTILINE))
    assert imported <= {"__future__", "fermix_core.hookspecs", "fermix_core.specs"}, imported


def test_the_code_blocks_are_lint_clean(project: Path) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
            "--select", "E,F,W,I,B,UP", "--line-length", "100", "--target-version", "py311",
            ".",
        ],
        cwd=project, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"{DOC_NAME} code blocks need fixing:\n{result.stdout}"


# --------------------------------------------------------------------------- installed


def test_the_plugins_load_through_their_entry_points(installed: FakeDistribution) -> None:
    host = PluginHost()
    host.load_entry_points(only=frozenset({DISTRIBUTION}))
    records = {r.name: r for r in host.records if r.distribution == DISTRIBUTION}
    assert set(records) == set(PLUGINS)
    for record in records.values():
        assert record.status == "loaded", record.error
        assert record.version == "0.1.0"
    assert records["tools.weather"].hooks == ["fermix_config_sections", "fermix_tools"]
    assert records["providers.almanac"].hooks == ["fermix_providers"]
    assert records["channels.relay"].hooks == ["fermix_channels"]

    registry = host.collect()
    assert registry.errors == []
    tool = registry.typed(ToolSpec)["weather_now"]
    assert tool.policy is PolicyClass.NETWORK
    assert tool.deferred is False
    assert registry.source_of(tool) == "tools.weather (fermix-weather 0.1.0)"
    section = registry.typed(ConfigSectionSpec)["fermix_weather"]
    assert registry.config_sections()["fermix_weather"][0] == section.model
    almanac = registry.typed(ProviderSpec)["almanac"]
    assert (almanac.keyless, almanac.needs_server) == (True, False)
    relay = registry.typed(ChannelSpec)["relay"]
    assert registry.config_sections()["fermix_channels.relay"][0] == relay.config_model
    # Collecting specs must not have imported the implementations (or httpx through them).
    imported = [name for name in HEAVY_MODULES if name in sys.modules]
    assert imported == [], f"collecting specs imported {imported}"


def test_the_registered_spec_builds_a_working_tool_definition(installed: FakeDistribution) -> None:
    from fermix_core.tool import build_tool

    host = PluginHost()
    host.load_entry_points(only=frozenset({PLUGIN_NAME}))
    spec = host.collect().typed(ToolSpec)["weather_now"]
    tool = build_tool(spec)
    definition = tool.definition()
    assert definition.name == "weather_now"
    assert set(definition.parameters["properties"]) == {"latitude", "longitude"}
    assert set(definition.parameters["required"]) == {"latitude", "longitude"}


def test_the_walkthrough_tests_pass(
    installed: FakeDistribution, project: Path, tmp_path: Path
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=_subprocess_env(installed, tmp_path / "home"),
        capture_output=True,
        text=True,
        check=False,
        timeout=110,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"the tests in {DOC_NAME} fail:\n{output}"
    passed = re.search(r"(\d+) passed", output)
    assert passed, output
    assert int(passed.group(1)) >= 30, output
    assert "skipped" not in output, output
    assert "error" not in output.lower(), output


def test_fermix_plugins_list_shows_the_plugin(
    installed: FakeDistribution, tmp_path: Path, doc_text: str
) -> None:
    # The author's project environment holds fermix-core and the plugins only: load exactly
    # those, so the table is the one the page shows.
    env = _subprocess_env(
        installed, tmp_path / "home", FERMIX_LOAD_PLUGINS=f"fermix-core,{DISTRIBUTION}"
    )
    command = [sys.executable, "-m", "fermix_core.cli", "plugins", "list"]
    as_json = subprocess.run(
        [*command, "--json"], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    records = {p["name"]: p for p in json.loads(as_json.stdout)["plugins"]}
    for name in PLUGINS:
        assert records[name]["status"] == "loaded", records[name]
        assert (records[name]["distribution"], records[name]["version"]) == (
            DISTRIBUTION,
            "0.1.0",
        )

    table = subprocess.run(
        command, env=env, capture_output=True, text=True, check=False, timeout=60
    )
    # Every row the page shows (header, core.*, the three plugins) must be what fermix prints;
    # rows for other installed distributions (blocked here) are not on the page.
    real = {row[0]: row for row in (line.split() for line in table.stdout.splitlines()) if row}
    documented = console_rows(doc_text, "uv run fermix plugins list")
    for row in documented:
        assert real.get(row[0]) == row, (
            f"{DOC_NAME} shows the row {' '.join(row)!r} but fermix prints "
            f"{' '.join(real.get(row[0], [])) or table.stdout!r}; update the console block"
        )


def test_fermix_config_validate_prints_what_the_page_shows(
    installed: FakeDistribution, tmp_path: Path, doc_text: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[fermix_weather]\nunit = "fahrenheit"\n', encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "fermix_core.cli", "config", "validate"],
        env=_subprocess_env(installed, home),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    documented = [" ".join(row) for row in console_rows(doc_text, "fermix config validate")]
    real = [" ".join(line.split()) for line in result.stdout.splitlines() if line.strip()]
    assert documented, f"{DOC_NAME} no longer shows `fermix config validate` output"
    assert real == documented, (
        f"{DOC_NAME} shows {documented!r} but fermix prints {real!r}; update the console block"
    )


# --------------------------------------------------------------------------- the daemon


RELAY_TOKEN = "walkthrough-relay-token"
#: What the Open-Meteo stand-in reports (the page's reply shows these numbers).
FORECAST = {
    "current": {"temperature_2m": 18.4, "wind_speed_10m": 11.2},
    "current_units": {"temperature_2m": "°C", "wind_speed_10m": "km/h"},
}


class RelayService:
    """Open-Meteo and the relay service's reply endpoint, on one loopback server."""

    def __init__(self) -> None:
        self.replies: list[dict] = []
        self.arrived: anyio.Event | None = None

    async def handle(self, request: RecordedRequest) -> Reply:
        if request.path.startswith("/v1/forecast"):
            return Reply(body=FORECAST)
        if request.path == "/replies":
            assert request.header("x-relay-token") == RELAY_TOKEN
            self.replies.append(request.json())
            if self.arrived is not None:
                self.arrived.set()
            return Reply(body={"id": f"r{len(self.replies)}"})
        return Reply(status=404, body={"error": "not found"})

    async def wait_replies(self, count: int) -> list[dict]:
        with anyio.fail_after(GUARD):
            while len(self.replies) < count:
                self.arrived = anyio.Event()
                await self.arrived.wait()
        return list(self.replies)


GUARD = 90  # seconds: a hang guard on a loaded machine, not a timing assertion


def _daemon_config(doc_text: str, server_url: str) -> str:
    """The page's config.toml, pointed at the loopback stand-ins."""
    config = tomllib.loads(marked_block(doc_text, "config", "config.toml"))
    relay = config["fermix_channels"]["relay"]
    assert relay["token"] == "@keyring", "the page should show the keyring form of the token"
    relay["token"] = RELAY_TOKEN  # the daemon's test keyring is empty: use the plaintext form
    relay["reply_url"] = f"{server_url}/replies"
    config["fermix_weather"]["base_url"] = server_url
    config["fermix_web"] = {"port": 0}
    return tomlkit.dumps(config)


def _fermix(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [FERMIX, *args], env=env, capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, f"fermix {' '.join(args)}: {result.stdout}{result.stderr}"
    return result


def _page_request(doc_text: str) -> tuple[dict, str]:
    """The JSON the page's curl posts, and the answer it shows."""
    block = marked_block(doc_text, "request", "relay").splitlines()
    [command] = [line.removeprefix("$ ") for line in block if line.startswith("$ curl")]
    words = shlex.split(command)
    body = json.loads(words[words.index("-d") + 1])
    headers = [words[i + 1] for i, w in enumerate(words) if w == "-H"]
    assert headers == ["X-Relay-Token: $RELAY_TOKEN"], headers
    [answer] = [line for line in block if line.startswith("{")]
    return body, answer


def test_the_daemon_answers_a_relay_message_through_the_almanac_and_the_tool(
    installed: FakeDistribution, tmp_path: Path, doc_text: str
) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    service = RelayService()
    with ThreadedLoopback(service.handle) as server:
        (home / "config.toml").write_text(_daemon_config(doc_text, server.url), encoding="utf-8")
        os.chmod(home / "config.toml", 0o600)
        env = _subprocess_env(installed, home, FERMIX_LOAD_PLUGINS=DISTRIBUTION)
        env.pop("FERMIX_HTTP_BIND", None)
        try:
            _fermix(env, "start")
            status = json.loads(_fermix(env, "status", "--json").stdout)
            channels = {c["name"]: c for c in status["channels"]}
            assert channels["relay"]["state"] == "ready", channels["relay"]
            assert status["primary_provider"] == "almanac"
            assert "POST /webhook/relay" in status["http"]["routes"]
            url = f"{status['http']['url']}/webhook/relay"

            body, shown = _page_request(doc_text)
            headers = {"X-Relay-Token": RELAY_TOKEN}
            answer = httpx.post(url, json=body, headers=headers, timeout=60)
            assert answer.status_code == 202, answer.text
            assert answer.json() == json.loads(shown)
            [reply] = server.call(service.wait_replies, 1)
            assert reply == json.loads(marked_block(doc_text, "reply", "relay"))

            # What the page promises next: a redelivery runs nothing, a stranger is dropped,
            # a forged token never reaches the gateway.
            again = httpx.post(url, json=body, headers=headers, timeout=60)
            assert again.json() == {"result": "duplicate"}
            stranger = {"id": "m-2", "sender": "mallory", "text": "weather at 1,2"}
            dropped = httpx.post(url, json=stranger, headers=headers, timeout=60)
            assert dropped.json() == {"result": "dropped"}
            forged = httpx.post(url, json=body, headers={"X-Relay-Token": "guess"}, timeout=60)
            assert forged.status_code == 403
            follow = {"id": "m-3", "sender": "alice", "text": "and at 52.52,13.41?"}
            assert httpx.post(url, json=follow, headers=headers, timeout=60).status_code == 202
            replies = server.call(service.wait_replies, 2)
            assert replies == [reply, reply]  # the stand-in reports the same weather anywhere
            forecasts = [
                parse_qs(urlsplit(r.path).query)
                for r in server.requests
                if r.path.startswith("/v1/forecast")
            ]
            # Each question made exactly one weather_now call, at the coordinate it named.
            assert [(q["latitude"], q["longitude"]) for q in forecasts] == [
                (["38.72"], ["-9.14"]),
                (["52.52"], ["13.41"]),
            ]
            assert {q["temperature_unit"][0] for q in forecasts} == {"celsius"}
        finally:
            subprocess.run([FERMIX, "stop"], env=env, capture_output=True, timeout=120)


def _load_config(home, text: str):
    from fermix_core.boot import assemble

    home.config_file.write_text(text, encoding="utf-8")
    return assemble(home, environ={"FERMIX_LOAD_PLUGINS": PLUGIN_NAME}).load_config()


def test_the_plugin_config_section_is_validated(installed: FakeDistribution, fermix_home) -> None:
    loaded = _load_config(fermix_home, '[fermix_weather]\nunits = "fahrenheit"\n')
    assert loaded.sections["fermix_weather"].units == "fahrenheit"
    assert loaded.warnings == []


def test_a_misspelt_key_in_the_section_fails_with_its_full_path(
    installed: FakeDistribution, fermix_home
) -> None:
    from fermix_core.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        _load_config(fermix_home, '[fermix_weather]\nunit = "celsius"\n')
    assert [p.path for p in caught.value.problems] == ["fermix_weather.unit"]
    assert "units" in str(caught.value), "the error should suggest the real key"


def test_the_page_s_config_toml_loads_and_reaches_each_plugin(
    installed: FakeDistribution, fermix_home, doc_text: str
) -> None:
    from fermix_core.boot import assemble

    fermix_home.config_file.write_text(
        marked_block(doc_text, "config", "config.toml"), encoding="utf-8"
    )
    loaded = assemble(fermix_home, environ={"FERMIX_LOAD_PLUGINS": DISTRIBUTION}).load_config()
    assert loaded.warnings == []
    assert loaded.provider_options("almanac").signature == " (almanac)"
    assert loaded.section("fermix_channels.relay").owner_user_id == "alice"
    assert loaded.section("fermix_weather").units == "celsius"


def test_a_misspelt_provider_key_fails_with_its_full_path(
    installed: FakeDistribution, fermix_home
) -> None:
    from fermix_core.boot import assemble
    from fermix_core.config import ConfigError

    fermix_home.config_file.write_text(
        '[fermix_core.providers.almanac]\nsignatur = "x"\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        assemble(fermix_home, environ={"FERMIX_LOAD_PLUGINS": DISTRIBUTION}).load_config()
    assert [p.path for p in caught.value.problems] == ["fermix_core.providers.almanac.signatur"]
    assert "signature" in str(caught.value), "the error should suggest the real key"


def test_the_section_of_a_disabled_plugin_is_kept_untouched(
    installed: FakeDistribution, fermix_home
) -> None:
    text = (
        '[fermix_core.plugins]\ndisabled = ["tools.weather"]\n\n'
        '[fermix_weather]\nunit = "not validated while disabled"\n'
    )
    loaded = _load_config(fermix_home, text)
    assert loaded.untouched["fermix_weather"] == {"unit": "not validated while disabled"}
    assert [w.path for w in loaded.warnings] == ["fermix_weather"]


def test_the_section_without_its_plugin_fails_config_load(fermix_home) -> None:
    # Uninstalled: no distribution claims [fermix_weather] any more, as the page warns.
    from fermix_core.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        _load_config(fermix_home, '[fermix_weather]\nunits = "celsius"\n')
    assert [p.path for p in caught.value.problems] == ["fermix_weather"]


# --------------------------------------------------------------------------- hostile cases


def test_a_misspelt_hook_fails_the_plugin_with_a_hint(
    tmp_path: Path, doc_files: dict[str, str], pyproject: dict
) -> None:
    # The page promises this message; prove it with the page's own plugin, broken.
    files = dict(doc_files)
    plugin = files["src/fermix_weather/plugin.py"]
    files["src/fermix_weather/plugin.py"] = plugin.replace(
        "def fermix_tools()", "def fermix_tool()"
    )
    assert files["src/fermix_weather/plugin.py"] != plugin
    dist = _install(tmp_path, files, pyproject)
    with dist.activate():
        host = PluginHost()
        host.load_entry_points(only=frozenset({PLUGIN_NAME}))
    [record] = [r for r in host.records if r.name == PLUGIN_NAME]
    assert record.status == "failed"
    assert "did you mean 'fermix_tools'?" in (record.error or "")


def test_two_plugins_with_one_tool_name_register_neither(
    tmp_path: Path, doc_files: dict[str, str], pyproject: dict
) -> None:
    first = _install(tmp_path / "a", doc_files, pyproject)
    plugin = doc_files["src/fermix_weather/plugin.py"]
    second = _install(
        tmp_path / "b",
        doc_files,
        pyproject,
        name="fermix-weather-plus",
        entry_points={"tools.weather_plus": "fermix_weather_plus.plugin"},
        modules={"fermix_weather_plus/plugin.py": plugin},
    )
    with first.activate(), second.activate():
        host = PluginHost()
        host.load_entry_points(only=frozenset({PLUGIN_NAME, "tools.weather_plus"}))
        registry = host.collect()
    assert "weather_now" not in registry.typed(ToolSpec)
    [error] = [e for e in registry.errors if e.kind == "tool"]
    assert error.name == "weather_now"
    assert any("fermix-weather 0.1.0" in s for s in error.sources)
    assert any("fermix-weather-plus 0.1.0" in s for s in error.sources)


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("<!-- file: a.py -->\ntext\n```python\nx = 1\n```\n", "followed directly"),
        ("<!-- file: a.py -->\n```python\nx = 1\n", "never closed"),
        ("<!-- file: a.py -->\n```python\n```\n<!-- file: a.py -->\n```python\n```\n", "twice"),
        ("<!-- file: ../escape.py -->\n```python\n```\n", "relative path"),
        ("<!-- file: /etc/passwd -->\n```python\n```\n", "relative path"),
    ],
)
def test_malformed_file_markers_are_rejected(markdown: str, problem: str) -> None:
    with pytest.raises(WalkthroughError, match=problem):
        extract_files(markdown)


def test_the_extractor_keeps_blocks_verbatim() -> None:
    markdown = "<!-- file: src/x.py -->\n```python\n    indented = True\n\n# trailing\n```\n"
    assert extract_files(markdown) == {"src/x.py": "    indented = True\n\n# trailing\n"}


@pytest.mark.anyio
async def test_the_configured_section_reaches_the_tool_in_a_real_turn(
    installed: FakeDistribution, fermix_home
) -> None:
    """ctx.settings() hands the tool the validated [fermix_weather] the operator wrote."""
    from fermix_core.api import Fermix
    from fermix_core.hookspecs import hookimpl
    from fermix_core.messages import ToolCall, Turn
    from fermix_core.specs import ModelInfo, ProviderSpec
    from fermix_core.testing import FunctionProvider
    from fermix_core.testing.loopback import LoopbackServer, Reply

    async def open_meteo(request) -> Reply:
        return Reply(
            body={
                "current": {"temperature_2m": 71.2, "wind_speed_10m": 9.0},
                "current_units": {"temperature_2m": "°F", "wind_speed_10m": "km/h"},
            }
        )

    seen = []

    async def model(request):
        seen.append(request)
        if len(seen) == 1:
            call = ToolCall(id="w1", name="weather_now", arguments={"latitude": 1, "longitude": 2})
            return Turn(content="", tool_calls=[call], model="m1")
        return Turn(content="done", model="m1")

    class Harness:
        @hookimpl
        def fermix_providers(self):
            yield ProviderSpec(
                name="harness",
                label="Harness",
                factory=lambda spec, settings: FunctionProvider(model, name="harness"),
                keyless=True,
                default_model="m1",
                models=(ModelInfo(id="m1", context_window=100_000),),
            )

    async with LoopbackServer(open_meteo) as server:
        config = {
            "fermix_core": {
                "providers": {"harness": {"primary": True, "base_url": "http://127.0.0.1:9/x"}},
                "memory": {"review_enabled": False},
            },
            "fermix_weather": {"units": "fahrenheit", "base_url": server.url},
        }
        async with Fermix.open(
            fermix_home, config=config, plugins=[("providers.harness", Harness())]
        ) as fx:
            await fx.ask("weather?")
    [request] = server.requests
    assert "temperature_unit=fahrenheit" in request.path
    result = next(m.tool_result for m in seen[1].messages if m.role == "tool")
    assert result.text == "71.2°F, wind 9.0 km/h" and not result.is_error
