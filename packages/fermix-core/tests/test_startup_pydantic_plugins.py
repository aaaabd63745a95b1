"""The console start's stand-in for pydantic's plugin loader (:mod:`fermix_core.startup`).

pydantic looks for plugins in the ``pydantic`` entry-point group by reading every installed
distribution's metadata. A one-off ``fermix ask`` skips that scan only when the home's
entry-point cache — keyed on what is installed — says the group is empty; a pydantic
plugin that is installed, or installed after the cache was written, is still loaded and
called. Each case runs in a fresh interpreter, as the console script does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from fermix_core.home import FermixHome
from fermix_core.plugins.discovery import (
    PYDANTIC_GROUP,
    pydantic_plugins_absent,
    scan_cache,
    scan_entry_points,
)
from fermix_core.testing.fakedist import fake_distribution

#: A pydantic plugin that records every schema validator pydantic builds.
RECORDER = """
    SEEN = []

    class Recorder:
        def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind,
                                 config, plugin_settings):
            SEEN.append(schema_type_path.name)
            return None, None, None

    plugin = Recorder()
"""

FILL = """
from fermix_core.home import FermixHome
from fermix_core.plugins.discovery import scan_cache, scan_entry_points
scan_entry_points(scan_cache(FermixHome.resolve()))
"""

PROBE = """
import json, sys
from fermix_core import startup
startup.begin()
from pydantic import BaseModel
class Probe(BaseModel):
    x: int
Probe(x=1)
loader = sys.modules["pydantic.plugin._loader"]
recorder = sys.modules.get("fermix_pyplugin")
result = {
    "served": getattr(loader.__spec__, "origin", None) == "fermix_core.startup",
    "metadata": "importlib.metadata" in sys.modules,
    "seen": recorder.SEEN if recorder else None,
}
startup.end()
print(json.dumps(result))
"""


def _run(code: str, home: Path, extra_path: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FERMIX_", "PYDANTIC_"))}
    env["FERMIX_HOME"] = str(home)
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    else:
        env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def probe(home: Path, extra_path: Path | None = None) -> dict:
    return json.loads(_run(PROBE, home, extra_path).strip().splitlines()[-1])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def plugin(tmp_path: Path):
    return fake_distribution(
        tmp_path,
        "fermix-pyplugin",
        "1.0.0",
        {"recorder": "fermix_pyplugin:plugin"},
        {"fermix_pyplugin": RECORDER},
        group=PYDANTIC_GROUP,
    )


@pytest.fixture
def no_pydantic_plugins_here() -> None:
    if list(metadata.entry_points(group=PYDANTIC_GROUP)):
        pytest.skip("a pydantic plugin is installed in this environment")


def test_with_a_cached_empty_group_pydantic_gets_the_stand_in(home: Path, no_pydantic_plugins_here):
    _run(FILL, home)
    result = probe(home)
    assert result == {"served": True, "metadata": False, "seen": None}


def test_without_a_cache_the_real_loader_scans(home: Path, no_pydantic_plugins_here) -> None:
    result = probe(home)
    assert result["served"] is False
    assert result["metadata"] is True


def test_an_installed_pydantic_plugin_is_loaded_and_called(home: Path, plugin) -> None:
    _run(FILL, home, plugin.path)
    result = probe(home, plugin.path)
    assert result["served"] is False
    assert "Probe" in result["seen"]


def test_a_plugin_installed_after_the_cache_was_written_is_called(
    home: Path, plugin, no_pydantic_plugins_here
) -> None:
    _run(FILL, home)  # the cache says: no pydantic plugins
    result = probe(home, plugin.path)  # then one appears on the path
    assert result["served"] is False
    assert "Probe" in result["seen"]


def test_a_damaged_cache_entry_is_not_trusted(home: Path, no_pydantic_plugins_here) -> None:
    _run(FILL, home)
    path = home / "cache" / "entry-points.json"
    data = json.loads(path.read_text())
    data["entries"][PYDANTIC_GROUP]["value"] = "not a list"
    path.write_text(json.dumps(data))
    assert probe(home)["served"] is False


def test_the_scan_records_the_pydantic_group(tmp_path: Path, plugin) -> None:
    home = FermixHome(tmp_path / "scan-home")
    home.path.mkdir()
    with plugin.activate():
        scan_entry_points(scan_cache(home))
        assert not pydantic_plugins_absent(scan_cache(home))
    assert not pydantic_plugins_absent(scan_cache(home))  # another stamp now: cannot tell
    scan_entry_points(scan_cache(home))
    expected = not list(metadata.entry_points(group=PYDANTIC_GROUP))
    assert pydantic_plugins_absent(scan_cache(home)) is expected
    assert not pydantic_plugins_absent(None)
