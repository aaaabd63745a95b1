from __future__ import annotations

import base64
import csv
import hashlib
import importlib
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest
from fermix_core.plugins.host import PluginHost
from fermix_core.testing.fakedist import FakeDistribution, fake_distribution

PLUGIN = """
    from fermix_core import hookimpl
    from fermix_core.specs import ToolSpec

    @hookimpl
    def fermix_tools():
        yield ToolSpec(name="{tool}", description="A fake tool.", factory="{module}:Tool")
"""


def make(
    tmp_path: Path, name: str, module: str, *, tool: str = "fake_tool", **kw: object
) -> FakeDistribution:
    return fake_distribution(
        tmp_path,
        name,
        "1.2.3",
        {f"tools.{tool}": module},
        {module: PLUGIN.format(tool=tool, module=module)},
        **kw,  # type: ignore[arg-type]
    )


def test_layout_matches_an_installed_distribution(tmp_path: Path) -> None:
    dist = fake_distribution(
        tmp_path,
        "fermix-fake",
        "0.4.0",
        {"tools.fake": "fermix_fake.plugin"},
        {"fermix_fake.plugin": "X = 1\n", "fermix_fake.util": "Y = 2\n"},
    )
    info = dist.path / "fermix_fake-0.4.0.dist-info"
    assert dist.dist_info == info
    assert (info / "METADATA").read_text().startswith("Metadata-Version: 2.1\nName: fermix-fake\n")
    assert (info / "entry_points.txt").read_text() == "[fermix]\ntools.fake = fermix_fake.plugin\n"
    assert (dist.path / "fermix_fake" / "__init__.py").read_text() == ""
    assert (dist.path / "fermix_fake" / "plugin.py").read_text() == "X = 1\n"

    rows = list(csv.reader((info / "RECORD").read_text().splitlines()))
    recorded = {row[0]: row for row in rows}
    assert recorded[f"{info.name}/RECORD"] == [f"{info.name}/RECORD", "", ""]
    for rel in ("fermix_fake/plugin.py", "fermix_fake/__init__.py", f"{info.name}/METADATA"):
        data = (dist.path / rel).read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert recorded[rel][1:] == [f"sha256={digest}", str(len(data))]

    read = dist.distribution()
    assert read.metadata["Name"] == "fermix-fake"
    assert read.version == "0.4.0"
    [ep] = dist.entry_points()
    assert (ep.name, ep.value, ep.group) == ("tools.fake", "fermix_fake.plugin", "fermix")
    assert ep.dist is not None
    assert ep.dist.name == "fermix-fake"


def test_module_keys_may_be_paths_and_sources_are_dedented(tmp_path: Path) -> None:
    dist = fake_distribution(
        tmp_path,
        "paths",
        modules={"pkg/sub/mod.py": "\n    A = 1\n    B = 2\n", "pkg": "ROOT = True\n", "solo": ""},
    )
    assert (dist.path / "pkg/sub/mod.py").read_text() == "\nA = 1\nB = 2\n"
    assert (dist.path / "pkg/__init__.py").read_text() == "ROOT = True\n"
    assert (dist.path / "pkg/sub/__init__.py").exists()
    assert (dist.path / "solo.py").exists()


@pytest.mark.parametrize(
    "modules",
    [
        {"../escape.py": ""},
        {"/abs/olute.py": ""},
        {"pkg/data.txt": ""},
        {"not-an.identifier": ""},
        {"a.b": "", "a/b.py": ""},
    ],
)
def test_hostile_module_keys_are_refused(tmp_path: Path, modules: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="module"):
        fake_distribution(tmp_path, "hostile", modules=modules)
    assert not (tmp_path.parent / "escape.py").exists()


@pytest.mark.parametrize(
    ("name", "version", "entry_points"),
    [
        ("bad name", "1.0", {}),
        ("-lead", "1.0", {}),
        ("ok", "1.0/../x", {}),
        ("ok", "1.0", {"a = b": "mod"}),
        ("ok", "1.0", {"[section]": "mod"}),
        ("ok", "1.0", {"name": "mod\n[other]\nx = y"}),
    ],
)
def test_hostile_names_are_refused(
    tmp_path: Path, name: str, version: str, entry_points: dict[str, str]
) -> None:
    with pytest.raises(ValueError, match=r"distribution name|version|entry-point"):
        fake_distribution(tmp_path, name, version, entry_points)


def test_the_same_distribution_cannot_be_written_twice(tmp_path: Path) -> None:
    fake_distribution(tmp_path, "twice")
    with pytest.raises(FileExistsError):
        fake_distribution(tmp_path, "twice")


def test_activate_makes_it_importable_and_cleans_up(tmp_path: Path) -> None:
    dist = make(tmp_path, "fermix-clean", "fermix_clean_plugin")
    paths_before = list(sys.path)
    with dist.activate():
        module = importlib.import_module("fermix_clean_plugin")
        assert module.__file__ is not None
        assert module.__file__.startswith(str(dist.path))
        found = [d for d in metadata.distributions() if d.metadata["Name"] == "fermix-clean"]
        assert len(found) == 1
    assert sys.path == paths_before
    assert "fermix_clean_plugin" not in sys.modules
    with pytest.raises(ImportError):
        importlib.import_module("fermix_clean_plugin")
    assert not [d for d in metadata.distributions() if d.metadata["Name"] == "fermix-clean"]


def test_activate_cleans_up_after_an_exception(tmp_path: Path) -> None:
    dist = make(tmp_path, "fermix-boom", "fermix_boom_plugin")

    def failing_test_body() -> None:
        with dist.activate():
            importlib.import_module("fermix_boom_plugin")
            raise RuntimeError("test body failed")

    with pytest.raises(RuntimeError, match="test body failed"):
        failing_test_body()
    assert str(dist.path) not in sys.path
    assert "fermix_boom_plugin" not in sys.modules


# ---------------------------------------------------------------- loader cases


def weather_record(host: PluginHost, name: str) -> list:
    return [r for r in host.records if r.name == name]


def test_loader_success(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_LOAD_PLUGINS", raising=False)
    dist = make(tmp_path, "fermix-ok", "fermix_ok_plugin", tool="ok_tool")
    with dist.activate():
        host = PluginHost()
        host.load_entry_points()
        [record] = weather_record(host, "tools.ok_tool")
        registry = host.collect()
    assert record.status == "loaded"
    assert (record.distribution, record.version) == ("fermix-ok", "1.2.3")
    assert record.hooks == ["fermix_tools"]
    spec = registry.get("tool", "ok_tool")
    assert spec is not None
    assert registry.source_of(spec) == "tools.ok_tool (fermix-ok 1.2.3)"


def test_loader_import_error_is_isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERMIX_LOAD_PLUGINS", raising=False)
    broken = fake_distribution(
        tmp_path,
        "fermix-broken",
        "0.1.0",
        {"tools.broken": "fermix_broken_plugin"},
        {"fermix_broken_plugin": "import fermix_dependency_that_is_not_installed\n"},
    )
    good = make(tmp_path, "fermix-good", "fermix_good_plugin", tool="good_tool")
    with broken.activate(), good.activate():
        host = PluginHost()
        host.load_entry_points()
        registry = host.collect()
    [failed] = weather_record(host, "tools.broken")
    assert failed.status == "failed"
    assert failed.error is not None
    assert "ModuleNotFoundError" in failed.error
    assert "fermix_dependency_that_is_not_installed" in failed.error
    assert registry.get("tool", "good_tool") is not None


def test_loader_blocked_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = make(tmp_path, "fermix-blocked", "fermix_blocked_plugin", tool="blocked_tool")
    monkeypatch.setenv("FERMIX_LOAD_PLUGINS", "tools.something_else")
    with dist.activate():
        host = PluginHost()
        host.load_entry_points()
        assert "fermix_blocked_plugin" not in sys.modules, "a blocked plugin is never imported"
    [record] = weather_record(host, "tools.blocked_tool")
    assert record.status == "blocked"
    assert host.collect().get("tool", "blocked_tool") is None


def test_loader_duplicate_names_report_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FERMIX_LOAD_PLUGINS", raising=False)
    one = make(tmp_path, "fermix-dup-one", "fermix_dup_one", tool="dup")
    two = make(tmp_path, "fermix-dup-two", "fermix_dup_two", tool="dup")
    with one.activate(), two.activate():
        host = PluginHost()
        host.load_entry_points()
    records = weather_record(host, "tools.dup")
    assert {r.distribution for r in records} == {"fermix-dup-one", "fermix-dup-two"}
    for record in records:
        assert record.status == "conflict"
        assert "fermix-dup-one 1.2.3" in (record.error or "")
        assert "fermix-dup-two 1.2.3" in (record.error or "")


def test_fixture_writes_under_tmp_path(
    fake_distribution: Callable[..., FakeDistribution], tmp_path: Path
) -> None:
    dist = fake_distribution("fermix-fixture", "2.0.0", {"tools.x": "fx_mod"}, {"fx_mod": "V = 1"})
    assert dist.path.parent == tmp_path
    assert dist.version == "2.0.0"
    with dist.activate():
        assert importlib.import_module("fx_mod").V == 1
    assert "fx_mod" not in sys.modules
