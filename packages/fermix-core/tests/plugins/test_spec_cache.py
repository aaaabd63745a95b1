"""First-party plugins' specs kept in ``$FERMIX_HOME/cache`` (a one-off ``fermix ask``): the
registry built from the cache is the one importing every plugin builds — same specs, same
order, same sources, same records — and the cache steps aside for changed code, damaged
entries, third-party plugins, values it cannot keep exactly, and hook ordering options."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from fermix_core import derived_cache
from fermix_core import specs as spec_types
from fermix_core.home import FermixHome
from fermix_core.plugins.discovery import scan_entry_points
from fermix_core.plugins.host import PluginHost
from fermix_core.plugins.spec_cache import FILE_NAME, SpecCache, Unencodable, decode, encode
from fermix_core.specs import PolicyClass, Role, ToolSpec


@pytest.fixture
def home(tmp_path: Path) -> FermixHome:
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return FermixHome(path)


def ep(name, value, dist, version="0.1.0"):
    return SimpleNamespace(name=name, value=value, dist=SimpleNamespace(name=dist, version=version))


def build(entry_points, cache: SpecCache | None):
    host = PluginHost(spec_cache=cache)
    host.load_entry_points(only=None, entry_points=entry_points)
    return host, host.collect()


def shape(host: PluginHost, registry) -> dict:
    """Everything a caller can see of the result, in order."""
    return {
        "records": [r.as_dict() for r in host.records],
        "specs": {kind: list(by_name.items()) for kind, by_name in registry.specs.items()},
        "sources": list(registry.sources.items()),
        "errors": [str(e) for e in registry.errors],
    }


def test_the_registry_from_the_cache_is_the_imported_one(home: FermixHome) -> None:
    installed = scan_entry_points(None)
    first_party = [e for e in installed if e.dist and e.dist.name.startswith("fermix-")]
    assert len(first_party) > 10
    plain_host, plain = build(installed, None)

    filling = SpecCache(home)
    filled_host, filled = build(installed, filling)
    assert filling.restored == 0 and filling.stored > 10
    assert (home.cache / FILE_NAME).exists()

    reading = SpecCache(home)
    read_host, read = build(installed, reading)
    assert reading.restored == filling.stored and reading.stored == 0
    assert shape(read_host, read) == shape(plain_host, plain) == shape(filled_host, filled)
    # Restored plugins are recorded as loaded without a module: nothing was imported.
    restored = [r for r in read_host.records if r.module is None]
    assert len(restored) == reading.restored
    assert all(r.status == "loaded" and r.hooks for r in restored)


def test_changed_code_is_imported_again(home: FermixHome, monkeypatch) -> None:
    installed = scan_entry_points(None)
    build(installed, SpecCache(home))
    # Any .py file of a plugin's package (or of fermix_core) changing changes its stamp.
    monkeypatch.setitem(derived_cache._stamps, "fermix_tools", "another tree")
    again = SpecCache(home)
    host, registry = build(installed, again)
    tools = [r for r in host.records if r.distribution == "fermix-tools"]
    assert tools and all(r.module is not None for r in tools)  # imported, not restored
    assert again.restored == len([r for r in host.records if r.module is None]) > 0
    assert again.stored == len(tools)  # and cached anew under the new stamp
    plain_host, plain = build(installed, None)
    assert shape(host, registry) == shape(plain_host, plain)


def test_a_damaged_entry_or_file_means_importing(home: FermixHome) -> None:
    installed = scan_entry_points(None)
    build(installed, SpecCache(home))
    path = home.cache / FILE_NAME
    data = json.loads(path.read_text())
    name = next(iter(data["entries"]))
    data["entries"][name]["value"]["specs"] = {"fermix_tools": [{"c": "os", "v": {}}]}
    other = next(n for n in data["entries"] if n != name)
    data["entries"][other]["value"] = "garbage"
    path.write_text(json.dumps(data))
    cache = SpecCache(home)
    host, registry = build(installed, cache)
    imported = {r.name for r in host.records if r.module is not None}
    assert {name, other} <= imported
    plain_host, plain = build(installed, None)
    assert shape(host, registry) == shape(plain_host, plain)

    path.write_text("{not json")
    host, registry = build(installed, SpecCache(home))
    assert shape(host, registry) == shape(plain_host, plain)
    assert json.loads(path.read_text())["format"] == 1  # rewritten


def test_third_party_plugins_are_always_imported(home: FermixHome, modules) -> None:
    modules(
        "fx_spec_third",
        """
        from fermix_core import hookimpl
        from fermix_core.specs import ToolSpec

        @hookimpl
        def fermix_tools():
            yield ToolSpec(name="third_tool", description="T.", factory="fx_spec_third:T")
        """,
    )
    entry = [ep("tools.third", "fx_spec_third", "weather-plugin")]
    first = SpecCache(home)
    build(entry, first)
    second = SpecCache(home)
    host, registry = build(entry, second)
    assert first.stored == second.restored == 0
    assert host.records[0].module is not None and "third_tool" in registry.of("tool")


def test_what_cannot_be_kept_exactly_keeps_its_plugin_imported(home, modules) -> None:
    modules(
        "fx_spec_callable",
        """
        from fermix_core import hookimpl
        from fermix_core.specs import ToolSpec

        def factory():
            return None

        @hookimpl
        def fermix_tools():
            yield ToolSpec(name="callable_tool", description="C.", factory=factory)
        """,
    )
    modules(
        "fx_spec_dependency",
        """
        import pytest  # outside the standard library, fermix_core and its own package
        from fermix_core import hookimpl
        from fermix_core.specs import ToolSpec

        @hookimpl
        def fermix_tools():
            yield ToolSpec(name="dep_tool", description="D.", factory="fx_spec_dependency:T")
        """,
    )
    # Named as if first-party, so only the values and imports decide.
    entries = [
        ep("tools.callable", "fx_spec_callable", "fermix-tools"),
        ep("tools.dependency", "fx_spec_dependency", "fermix-tools"),
    ]
    cache = SpecCache(home)
    _host, registry = build(entries, cache)
    assert cache.stored == 0
    assert {"callable_tool", "dep_tool"} <= set(registry.of("tool"))


def test_an_ordering_option_elsewhere_imports_the_cached_plugins(home, modules) -> None:
    installed = scan_entry_points(None)
    build(installed, SpecCache(home))
    modules(
        "fx_spec_first",
        """
        from fermix_core import hookimpl
        from fermix_core.specs import ToolSpec

        @hookimpl(tryfirst=True)
        def fermix_tools():
            yield ToolSpec(name="first_tool", description="F.", factory="fx_spec_first:T")
        """,
    )
    entries = [*installed, ep("tools.first", "fx_spec_first", "early-plugin")]
    host, registry = build(entries, SpecCache(home))
    assert all(r.module is not None for r in host.records if r.status == "loaded")
    plain_host, plain = build(entries, None)
    assert shape(host, registry) == shape(plain_host, plain)


def test_every_spec_value_round_trips_and_others_are_refused() -> None:
    values = [
        ToolSpec(
            name="t",
            description="d",
            factory="a.b:C",
            policy=PolicyClass.WRITE,
            failure_modes=("x", "y"),
            timeout_seconds=1.5,
        ),
        spec_types.ChannelSpec(name="c", env={"A_B": "a_b"}, factory="a:b"),
        spec_types.CommandSpec(name="n", help="h", handler="a:b", role=Role.ANY, aliases=("m",)),
        spec_types.ProviderSpec(
            name="p",
            factory="a:b",
            config_keys=frozenset({"x", "y"}),
            models=(spec_types.ModelInfo(id="m", context_window=8),),
            setup_fields=(spec_types.SetupField(key="k", prompt="P"),),
        ),
        [1, None, True, {"k": (1, 2)}, {3: "int key"}],
    ]
    for value in values:
        data = json.loads(json.dumps(encode(value)))  # as a later process reads it
        again = decode(data)
        assert again == value and type(again) is type(value)
    for bad in (len, object(), {1, 2}, b"bytes", SimpleNamespace()):
        with pytest.raises(Unencodable):
            encode(bad)
    for junk in ({"c": "os", "v": {}}, {"x": []}, {"t": "abc"}, {"c": "Role", "v": {}}, [1]):
        with pytest.raises((ValueError, TypeError, KeyError)):
            decode(junk)
