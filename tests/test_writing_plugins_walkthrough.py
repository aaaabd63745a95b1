"""docs/writing-plugins.md builds a plugin that actually works.

The page marks every file of the ``fermix-weather`` project with ``<!-- file: PATH -->``
before its code block. These tests extract those blocks, write them into a scratch project,
install it as a real (fake-installed) distribution — a ``.dist-info`` with the entry points
the page's ``pyproject.toml`` declares — and then check what the page promises: the plugin
loads through discovery, registers its tool and config section without importing the tool
module, passes its own tests (including fermix-core's ``ToolContract``) and shows up in
``fermix plugins list``. An edit to the page that breaks any of that fails here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import ConfigSectionSpec, PolicyClass, ToolSpec
from fermix_core.testing import FakeDistribution, fake_distribution

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "writing-plugins.md"
DOC_NAME = "docs/writing-plugins.md"
PLUGIN_NAME = "tools.weather"

FILE_MARK_RE = re.compile(r"^<!--\s*file:\s*(?P<path>\S+)\s*-->\s*$")
FENCE_OPEN_RE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")

EXPECTED_FILES = {
    "pyproject.toml",
    "src/fermix_weather/__init__.py",
    "src/fermix_weather/config.py",
    "src/fermix_weather/tool.py",
    "src/fermix_weather/plugin.py",
    "tests/test_weather.py",
}


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
    assert meta["entry-points"]["fermix"] == {PLUGIN_NAME: "fermix_weather.plugin"}
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


def test_registration_module_imports_nothing_heavy(doc_files: dict[str, str]) -> None:
    plugin = doc_files["src/fermix_weather/plugin.py"]
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


def test_the_plugin_loads_through_its_entry_point(installed: FakeDistribution) -> None:
    host = PluginHost()
    host.load_entry_points(only=frozenset({PLUGIN_NAME}))
    [record] = [r for r in host.records if r.name == PLUGIN_NAME]
    assert record.status == "loaded", record.error
    assert record.distribution == "fermix-weather"
    assert record.version == "0.1.0"
    assert record.hooks == ["fermix_config_sections", "fermix_tools"]

    registry = host.collect()
    assert registry.errors == []
    tool = registry.typed(ToolSpec)["weather_now"]
    assert tool.policy is PolicyClass.NETWORK
    assert registry.source_of(tool) == "tools.weather (fermix-weather 0.1.0)"
    section = registry.typed(ConfigSectionSpec)["fermix_weather"]
    assert registry.config_sections()["fermix_weather"][0] == section.model
    # Collecting specs must not have imported the tool (or httpx through it).
    assert "fermix_weather.tool" not in sys.modules


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
    assert int(passed.group(1)) >= 10, output
    assert "skipped" not in output, output
    assert "error" not in output.lower(), output


def test_fermix_plugins_list_shows_the_plugin(
    installed: FakeDistribution, tmp_path: Path, doc_text: str
) -> None:
    # The author's project environment holds fermix-core and the plugin only: load exactly
    # those, so the table is the one the page shows.
    env = _subprocess_env(
        installed, tmp_path / "home", FERMIX_LOAD_PLUGINS=f"fermix-core,{PLUGIN_NAME}"
    )
    command = [sys.executable, "-m", "fermix_core.cli", "plugins", "list"]
    as_json = subprocess.run(
        [*command, "--json"], env=env, capture_output=True, text=True, check=False, timeout=60
    )
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    records = {p["name"]: p for p in json.loads(as_json.stdout)["plugins"]}
    weather = records[PLUGIN_NAME]
    assert weather["status"] == "loaded", weather
    assert (weather["distribution"], weather["version"]) == ("fermix-weather", "0.1.0")

    table = subprocess.run(
        command, env=env, capture_output=True, text=True, check=False, timeout=60
    )
    # Every row the page shows (header, core.builtins, tools.weather) must be what fermix
    # prints; rows for other installed plugins (blocked here) are not on the page.
    real = {row[0]: row for row in (line.split() for line in table.stdout.splitlines()) if row}
    documented = console_rows(doc_text, "uv run fermix plugins list")
    assert [PLUGIN_NAME] in [row[:1] for row in documented], (
        f"{DOC_NAME} no longer shows the {PLUGIN_NAME} row of `fermix plugins list`"
    )
    for row in documented:
        assert real.get(row[0]) == row, (
            f"{DOC_NAME} shows the row {' '.join(row)!r} but fermix prints "
            f"{' '.join(real.get(row[0], [])) or table.stdout!r}; update the console block"
        )
    # ... and no row of that environment is missing from the page.
    in_author_env = {
        name
        for name, row in real.items()
        if len(row) > 1 and row[1] in {"fermix-core", "fermix-weather"} and "loaded" in row
    }
    assert in_author_env == {row[0] for row in documented[1:]}, (
        f"{DOC_NAME}'s table lacks rows fermix prints: {sorted(in_author_env)}"
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
