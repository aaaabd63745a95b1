"""The ``fermix`` entry-point scan kept in ``$FERMIX_HOME/cache``: reused while nothing
installed on ``sys.path`` changes, rescanned as soon as something does, never trusted
when the file is damaged."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
from fermix_core.boot import assemble
from fermix_core.derived_cache import DerivedCache
from fermix_core.home import FermixHome
from fermix_core.plugins import discovery
from fermix_core.plugins.discovery import installed_stamp, scan_entry_points
from fermix_core.testing.fakedist import fake_distribution

PLUGIN = """
    from fermix_core import hookimpl
    from fermix_core.specs import ToolSpec

    @hookimpl
    def fermix_tools():
        yield ToolSpec(name="{tool}", description="A fake tool.", factory="{module}:Tool")
"""


def plugin_dist(tmp_path: Path, name: str, module: str, tool: str):
    return fake_distribution(
        tmp_path,
        name,
        "1.0.0",
        {f"tools.{tool}": module},
        {module: PLUGIN.format(tool=tool, module=module)},
    )


def cache_for(home: FermixHome) -> DerivedCache:
    return DerivedCache(home, discovery.SCAN_CACHE_FILE, discovery.SCAN_CACHE_FORMAT)


def names(found) -> set[tuple[str, str, str | None]]:
    return {(ep.name, ep.value, getattr(ep.dist, "name", None)) for ep in found}


@pytest.fixture
def no_scan(monkeypatch: pytest.MonkeyPatch):
    """Make a metadata scan fail loudly: a hit must not need one."""

    def refuse(**_kw):
        raise AssertionError("the installed metadata was scanned")

    def arm() -> None:
        monkeypatch.setattr(metadata, "entry_points", refuse)

    return arm


def test_a_second_scan_comes_from_the_cache(tmp_path: Path, no_scan) -> None:
    home = FermixHome(tmp_path / "home")
    dist = plugin_dist(tmp_path, "fermix-alpha", "fermix_alpha.plugin", "alpha")
    with dist.activate():
        first = scan_entry_points(cache_for(home))
        assert ("tools.alpha", "fermix_alpha.plugin", "fermix-alpha") in names(first)
        assert names(first) == names(metadata.entry_points(group="fermix"))
        no_scan()
        again = scan_entry_points(cache_for(home))
    assert names(again) == names(first)
    assert {ep.dist.version for ep in again if ep.name == "tools.alpha"} == {"1.0.0"}


def test_installing_a_distribution_is_a_miss(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "home")
    alpha = plugin_dist(tmp_path, "fermix-alpha", "fermix_alpha.plugin", "alpha")
    beta = plugin_dist(tmp_path, "fermix-beta", "fermix_beta.plugin", "beta")
    with alpha.activate():
        before = installed_stamp()
        scan_entry_points(cache_for(home))
        with beta.activate():
            assert installed_stamp() != before
            found = names(scan_entry_points(cache_for(home)))
    assert ("tools.beta", "fermix_beta.plugin", "fermix-beta") in found


def test_a_changed_entry_points_file_is_a_miss(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "home")
    dist = plugin_dist(tmp_path, "fermix-alpha", "fermix_alpha.plugin", "alpha")
    with dist.activate():
        scan_entry_points(cache_for(home))
        (dist.dist_info / "entry_points.txt").write_text(
            "[fermix]\ntools.alpha = fermix_alpha.plugin\ntools.alpha2 = fermix_alpha.plugin\n"
        )
        found = names(scan_entry_points(cache_for(home)))
    assert ("tools.alpha2", "fermix_alpha.plugin", "fermix-alpha") in found


@pytest.mark.parametrize(
    "entry",
    [
        "not a list",
        [["tools.x", "mod"]],  # a row of the wrong length
        [["tools.x", 3, None, None]],  # a value that is not a string
    ],
)
def test_a_damaged_cache_is_rescanned(tmp_path: Path, entry) -> None:
    home = FermixHome(tmp_path / "home")
    dist = plugin_dist(tmp_path, "fermix-alpha", "fermix_alpha.plugin", "alpha")
    with dist.activate():
        scan_entry_points(cache_for(home))
        path = home.cache / "entry-points.json"
        data = json.loads(path.read_text())
        data["entries"]["fermix"]["value"] = entry
        path.write_text(json.dumps(data))
        found = names(scan_entry_points(cache_for(home)))
    assert ("tools.alpha", "fermix_alpha.plugin", "fermix-alpha") in found


def test_assembly_loads_plugins_from_a_cached_scan(tmp_path: Path, no_scan) -> None:
    home = FermixHome(tmp_path / "home")
    home.ensure()  # before setup there is no home, and assembly does not create one
    dist = plugin_dist(tmp_path, "fermix-alpha", "fermix_alpha.plugin", "alpha")
    env = {"FERMIX_LOAD_PLUGINS": "fermix-alpha"}
    with dist.activate():
        first = assemble(home, environ=env)
        no_scan()
        second = assemble(home, environ=env)
        record = next(r for r in second.host.records if r.name == "tools.alpha")
        assert (record.status, record.distribution, record.version) == (
            "loaded",
            "fermix-alpha",
            "1.0.0",
        )
        assert "alpha" in second.registry.of("tool")
    assert [r.as_dict() for r in first.host.records] == [r.as_dict() for r in second.host.records]


def test_assembly_without_a_home_neither_creates_it_nor_caches(tmp_path: Path) -> None:
    home = FermixHome(tmp_path / "home")
    assemble(home, environ={"FERMIX_LOAD_PLUGINS": ""})
    assert not home.path.exists()


def test_a_one_off_command_stamps_sys_path_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from fermix_core import startup

    calls: list[object] = []
    real = discovery._installed_stamp

    def counting(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(discovery, "_installed_stamp", counting)
    installed_stamp()
    installed_stamp()
    assert len(calls) == 2  # a long-lived process sees what gets installed meanwhile
    monkeypatch.setattr(startup, "_state", {"booted": True})  # as begin() leaves it
    first = installed_stamp()
    assert installed_stamp() == first and len(calls) == 3
    assert installed_stamp(["/nonexistent"]) and len(calls) == 4  # another path: computed
