"""Tool wire definitions cached on disk: a new process sends them without importing the
tool's module, and any change to the spec or the code is a miss, never a stale schema."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest
from fermix_core import derived_cache
from fermix_core.agent import CapabilityRegistry
from fermix_core.agent import definition_cache as dc
from fermix_core.home import FermixHome
from fermix_core.specs import ToolSpec
from fermix_core.tool import Trust

TOOL_SOURCE = """
from pydantic import BaseModel, Field
from fermix_core.tool import Tool

class Args(BaseModel):
    city: str = Field(description="Where.")

class Weather(Tool[Args]):
    async def run(self, args, ctx):
        return args.city
"""

SPEC = ToolSpec(
    name="weather",
    description="The weather in a city.",
    factory="cachedemo_pkg.tool:Weather",
    args_model="cachedemo_pkg.tool:Args",
)


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "src" / "cachedemo_pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "tool.py").write_text(textwrap.dedent(TOOL_SOURCE))
    monkeypatch.syspath_prepend(str(root.parent))
    monkeypatch.setattr(derived_cache, "_stamps", {})  # a fresh process's view of the code
    yield root
    for name in [m for m in sys.modules if m.startswith("cachedemo_pkg")]:
        del sys.modules[name]


def new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget what this process imported and stamped, as a new ``fermix ask`` would."""
    for name in [m for m in sys.modules if m.startswith("cachedemo_pkg")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(derived_cache, "_stamps", {})


def wire(home: FermixHome, *specs: ToolSpec) -> dict[str, dict]:
    registry = CapabilityRegistry(
        specs or [SPEC], deferral=False, definition_cache=dc.DefinitionCache(home)
    )
    definitions = registry.snapshot(Trust.OPERATOR).definitions()
    registry.definition_cache.save(set(registry.specs))
    return {d.name: d.parameters for d in definitions}


def test_a_second_process_sends_the_cached_definition_without_importing_the_tool(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    first = wire(home)
    assert "city" in first["weather"]["properties"]
    cache_file = home.cache / dc.FILE_NAME
    assert stat.S_IMODE(cache_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(home.cache.stat().st_mode) == 0o700

    new_process(monkeypatch)
    assert wire(home) == first
    assert "cachedemo_pkg.tool" not in sys.modules  # nothing was built


def test_changed_code_is_a_miss(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    wire(home)
    source = package / "tool.py"
    source.write_text(
        source.read_text().replace(
            'city: str = Field(description="Where.")',
            'city: str = Field(description="Where.")\n    days: int = 1',
        )
    )
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    new_process(monkeypatch)
    assert "days" in wire(home)["weather"]["properties"]
    assert "cachedemo_pkg.tool" in sys.modules  # rebuilt from the new code


def test_a_changed_spec_is_a_miss(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    wire(home)
    new_process(monkeypatch)
    renamed = ToolSpec(
        name="weather",
        description="Another description.",
        factory=SPEC.factory,
        args_model=SPEC.args_model,
    )
    registry = CapabilityRegistry(
        [renamed], deferral=False, definition_cache=dc.DefinitionCache(home)
    )
    [definition] = registry.snapshot(Trust.OPERATOR).definitions()
    assert definition.description == "Another description."
    assert "cachedemo_pkg.tool" in sys.modules


def test_a_callable_factory_is_never_cached(package: Path, tmp_path: Path) -> None:
    from cachedemo_pkg.tool import Args, Weather

    home = FermixHome(tmp_path / "home")
    spec = ToolSpec(name="weather", description="x", factory=Weather, args_model=Args)
    assert dc.spec_key(spec) is None
    wire(home, spec)
    assert not (home.cache / dc.FILE_NAME).exists()


@pytest.mark.parametrize(
    "content", ["not json", json.dumps({"format": 99, "entries": {}}), json.dumps([1, 2])]
)
def test_an_unreadable_cache_is_ignored_and_rewritten(
    package: Path, tmp_path: Path, content: str
) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure_dir("cache")
    (home.cache / dc.FILE_NAME).write_text(content)
    assert "city" in wire(home)["weather"]["properties"]
    data = json.loads((home.cache / dc.FILE_NAME).read_text())
    assert data["format"] == dc.FORMAT and "weather" in data["entries"]


def test_a_tampered_entry_with_the_right_key_but_a_bad_shape_is_rebuilt(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = FermixHome(tmp_path / "home")
    wire(home)
    path = home.cache / dc.FILE_NAME
    data = json.loads(path.read_text())
    data["entries"]["weather"]["value"] = {"name": "not a valid name!"}
    path.write_text(json.dumps(data))
    new_process(monkeypatch)
    assert "city" in wire(home)["weather"]["properties"]
