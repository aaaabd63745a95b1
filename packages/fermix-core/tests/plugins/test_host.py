from __future__ import annotations

import sys
import textwrap
from types import ModuleType, SimpleNamespace

import pytest
from fermix_core.hookspecs import hookimpl
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import CommandSpec, ProviderSpec, Role, ToolSpec


def make_module(name: str, source: str) -> ModuleType:
    module = ModuleType(name)
    exec(compile(textwrap.dedent(source), f"<{name}>", "exec"), module.__dict__)
    return module


def ep(name, value, dist="fermix-test", version="0.0.1"):
    return SimpleNamespace(name=name, value=value, dist=SimpleNamespace(name=dist, version=version))


GOOD = """
from fermix_core import hookimpl
from fermix_core.specs import ToolSpec

@hookimpl
def fermix_tools():
    yield ToolSpec(name="weather_now", description="Weather.", factory="fx_test_good:Tool")
"""


def test_import_error_is_isolated_and_reported(modules) -> None:
    modules("fx_test_good", GOOD)
    modules("fx_test_broken", "raise RuntimeError('boom at import')\n")
    host = PluginHost()
    records = host.load_entry_points(
        only=None,
        entry_points=[
            ep("tools.good", "fx_test_good"),
            ep("tools.broken", "fx_test_broken", dist="fermix-broken"),
        ],
    )
    status = {r.name: r for r in records}
    assert status["tools.good"].status == "loaded"
    assert status["tools.good"].hooks == ["fermix_tools"]
    assert status["tools.broken"].status == "failed"
    assert "RuntimeError: boom at import" in status["tools.broken"].error
    registry = host.collect()
    assert "weather_now" in registry.of("tool")
    assert (
        registry.source_of(registry.get("tool", "weather_now")) == "tools.good (fermix-test 0.0.1)"
    )


def test_system_exit_during_import_does_not_escape(modules) -> None:
    modules("fx_test_exit", "import sys\nsys.exit(3)\n")
    host = PluginHost()
    [record] = host.load_entry_points(only=None, entry_points=[ep("tools.exit", "fx_test_exit")])
    assert record.status == "failed"
    assert "SystemExit" in record.error


def test_missing_module_is_reported(modules) -> None:
    host = PluginHost()
    [record] = host.load_entry_points(only=None, entry_points=[ep("tools.ghost", "fx_test_nope")])
    assert record.status == "failed"
    assert "ModuleNotFoundError" in record.error


def test_unknown_hook_name_is_rejected_with_suggestion(modules) -> None:
    modules(
        "fx_test_typo",
        """
        from fermix_core import hookimpl

        @hookimpl
        def fermix_tool():
            return []
        """,
    )
    host = PluginHost()
    [record] = host.load_entry_points(only=None, entry_points=[ep("tools.typo", "fx_test_typo")])
    assert record.status == "failed"
    assert "fermix_tool" in record.error and "did you mean 'fermix_tools'" in record.error


def test_bad_hook_signature_is_rejected(modules) -> None:
    modules(
        "fx_test_sig",
        """
        from fermix_core import hookimpl

        @hookimpl
        def fermix_tools(unexpected):
            return []
        """,
    )
    host = PluginHost()
    [record] = host.load_entry_points(only=None, entry_points=[ep("tools.sig", "fx_test_sig")])
    assert record.status == "failed"
    assert "hook validation failed" in record.error


def test_blocked_plugin_is_never_imported(modules) -> None:
    modules("fx_test_blocked", "raise AssertionError('must not be imported')\n")
    host = PluginHost()
    [record] = host.load_entry_points(
        only=frozenset(), entry_points=[ep("tools.blocked", "fx_test_blocked")]
    )
    assert record.status == "blocked"
    assert "fx_test_blocked" not in sys.modules


def test_hook_that_raises_or_yields_junk_is_attributed() -> None:
    class Raises:
        @hookimpl
        def fermix_tools(self):
            raise ValueError("nope")

    class Junk:
        @hookimpl
        def fermix_providers(self):
            return ["not a spec", ToolSpec(name="wrong_kind", description="x", factory="a:b")]

    host = PluginHost()
    host.register(Raises(), "tools.raises", distribution="fermix-raises", version="1")
    host.register(Junk(), "providers.junk")
    registry = host.collect()
    messages = [str(e) for e in registry.errors]
    assert any(
        "fermix_tools() raised ValueError: nope" in m and "fermix-raises 1" in m for m in messages
    )
    assert any("yielded str, expected ProviderSpec" in m for m in messages)
    assert any("yielded ToolSpec, expected ProviderSpec" in m for m in messages)
    assert registry.of("provider") == {}


def test_duplicate_spec_names_are_one_error_listing_every_source() -> None:
    def plugin(label):
        class P:
            @hookimpl
            def fermix_tools(self):
                yield ToolSpec(name="shell", description=f"{label} shell", factory="a.b:c")

        return P()

    host = PluginHost()
    host.register(plugin("one"), "tools.one", distribution="fermix-one", version="1")
    host.register(plugin("two"), "tools.two", distribution="fermix-two", version="2")
    host.register(plugin("three"), "tools.three")
    registry = host.collect()
    dupes = [e for e in registry.errors if e.message == "registered more than once"]
    assert len(dupes) == 1
    assert dupes[0].sources == (
        "tools.one (fermix-one 1)",
        "tools.two (fermix-two 2)",
        "tools.three (in-process)",
    )
    assert registry.get("tool", "shell") is None


def test_command_alias_collides_with_another_command() -> None:
    class P:
        @hookimpl
        def fermix_commands(self):
            yield CommandSpec(name="new", help="Clear.", handler="a.b:c", aliases=("clear",))
            yield CommandSpec(name="clear", help="Other.", handler="a.b:d", role=Role.ANY)

    host = PluginHost()
    host.register(P(), "commands.p")
    registry = host.collect()
    assert any(e.name == "clear" for e in registry.errors)


def test_invalid_spec_is_reported_and_dropped() -> None:
    class P:
        @hookimpl
        def fermix_providers(self):
            yield ProviderSpec(name="Bad-Name", factory="not a ref")
            yield ProviderSpec(name="fine", factory="pkg.mod:Cls")

    host = PluginHost()
    host.register(P(), "providers.p")
    registry = host.collect()
    assert set(registry.of("provider")) == {"fine"}
    [error] = registry.errors
    assert "must be lowercase" in error.message and "import path" in error.message


def test_in_process_name_clash_is_a_conflict() -> None:
    class P:
        pass

    host = PluginHost()
    assert host.register(P(), "x.one").status == "loaded"
    second = host.register(P(), "x.one")
    assert second.status == "conflict"


@pytest.mark.anyio
async def test_lifecycle_hooks_await_async_and_isolate_failures() -> None:
    calls = []

    class First:
        @hookimpl
        async def fermix_startup(self, runtime):
            calls.append(("start", "first", runtime))

        @hookimpl
        def fermix_shutdown(self):
            calls.append(("stop", "first"))

    class Broken:
        @hookimpl
        def fermix_startup(self, runtime):
            raise RuntimeError("cannot start")

    class Last:
        @hookimpl
        def fermix_startup(self, runtime):
            calls.append(("start", "last", runtime))

        @hookimpl
        async def fermix_shutdown(self, runtime):
            calls.append(("stop", "last"))

    host = PluginHost()
    host.register(First(), "a.first")
    host.register(Broken(), "a.broken")
    host.register(Last(), "a.last")
    failures = await host.startup("RT")
    assert calls == [("start", "first", "RT"), ("start", "last", "RT")]
    assert failures == [("a.broken", failures[0][1])] and "cannot start" in failures[0][1]
    calls.clear()
    assert await host.shutdown("RT") == []
    assert calls == [("stop", "last"), ("stop", "first")]


def test_events_reach_observers_and_a_failing_observer_is_skipped() -> None:
    seen = []

    class Bad:
        @hookimpl
        def fermix_event(self, event):
            raise RuntimeError("observer down")

    class Good:
        @hookimpl
        def fermix_event(self, event):
            seen.append((event.name, event.data))

    host = PluginHost()
    host.register(Bad(), "o.bad")
    host.register(Good(), "o.good")
    host.emit("provider.failover", from_provider="openai", to_provider="anthropic")
    assert seen == [("provider.failover", {"from_provider": "openai", "to_provider": "anthropic"})]


def test_resolve_secret_first_result_wins_and_errors_are_contained() -> None:
    class Declines:
        @hookimpl
        def fermix_resolve_secret(self, request):
            return None

    class Answers:
        @hookimpl
        def fermix_resolve_secret(self, request):
            return f"value-for-{request.env}"

    host = PluginHost()
    host.register(Answers(), "s.answers")
    host.register(Declines(), "s.declines")
    assert host.resolve_secret(SimpleNamespace(env="ACME_API_KEY")) == "value-for-ACME_API_KEY"

    class Raises:
        @hookimpl
        def fermix_resolve_secret(self, request):
            raise RuntimeError("vault sealed")

    broken = PluginHost()
    broken.register(Raises(), "s.raises")
    assert broken.resolve_secret(SimpleNamespace(env="X")) is None


def test_a_third_party_tool_cannot_take_a_first_party_name() -> None:
    def plugin(label):
        class P:
            @hookimpl
            def fermix_tools(self):
                yield ToolSpec(name="shell", description=f"{label} shell", factory="a.b:c")

        return P()

    host = PluginHost()
    host.register(plugin("built-in"), "tools.shell", distribution="fermix-tools", version="0.1.0")
    host.register(plugin("rogue"), "rogue.tools", distribution="fermix-rogue", version="2")
    host.register(plugin("local"), "local.tools")
    registry = host.collect()
    kept = registry.get("tool", "shell")
    assert kept is not None and kept.description == "built-in shell"
    assert registry.source_of(kept) == "tools.shell (fermix-tools 0.1.0)"
    refused = [e for e in registry.errors if e.name == "shell"]
    assert [e.sources for e in refused] == [
        ("rogue.tools (fermix-rogue 2)",),
        ("local.tools (in-process)",),
    ]
    assert "reserved by first-party tools.shell (fermix-tools 0.1.0)" in refused[0].message
    assert "rename it in distribution fermix-rogue" in refused[0].message
    assert "rename it in the in-process plugin" in str(refused[1])


def test_two_first_party_claimants_are_still_ambiguous() -> None:
    def plugin(label):
        class P:
            @hookimpl
            def fermix_tools(self):
                yield ToolSpec(name="twin", description=f"{label} twin", factory="a.b:c")

        return P()

    host = PluginHost()
    host.register(plugin("a"), "tools.a", distribution="fermix-tools", version="0.1.0")
    host.register(plugin("b"), "core.b", distribution="fermix-core", version="0.1.0")
    registry = host.collect()
    assert registry.get("tool", "twin") is None
    assert [e.message for e in registry.errors] == ["registered more than once"]


def test_a_marked_function_without_the_prefix_is_rejected_not_ignored(modules) -> None:
    modules(
        "fx_test_unprefixed",
        """
        from fermix_core import hookimpl

        @hookimpl
        def tools():
            return []
        """,
    )
    host = PluginHost()
    [record] = host.load_entry_points(
        only=None, entry_points=[ep("tools.unprefixed", "fx_test_unprefixed")]
    )
    assert record.status == "failed"
    assert "unknown hook 'tools'" in record.error and "did you mean 'fermix_tools'" in record.error


def test_a_plugin_with_no_hook_loads_with_a_warning(modules) -> None:
    modules(
        "fx_test_hookless",
        """
        def fermix_tools():  # forgot @hookimpl
            return []
        """,
    )
    host = PluginHost()
    [record] = host.load_entry_points(
        only=None, entry_points=[ep("tools.hookless", "fx_test_hookless")]
    )
    assert record.status == "loaded" and record.hooks == []
    assert "implements no hook" in record.warning and "@hookimpl" in record.warning
    assert record.as_dict()["warning"] == record.warning


def test_hook_scanning_never_runs_a_plugin_objects_properties() -> None:
    class Plugin:
        @property
        def explodes(self):
            raise RuntimeError("a property ran during hook scanning")

        @hookimpl
        def fermix_tools(self):
            return []

    host = PluginHost()
    record = host.register(Plugin(), "tools.props")
    assert record.status == "loaded" and record.hooks == ["fermix_tools"]


def test_a_first_party_module_registered_in_process_stays_first_party() -> None:
    import fermix_tools.memory.plugin as memory_tools

    host = PluginHost()
    record = host.register(memory_tools, "tools.memory")
    assert record.status == "loaded"
    assert record.distribution == "fermix-tools" and record.first_party
    other = host.register(make_module("fx_app_plugin", "x = 1"), "app.thing")
    assert other.distribution is None and not other.first_party


def test_every_marked_attribute_is_registered_and_called_whatever_its_form() -> None:
    """pluggy is told which attributes carry the marker; none of them may be missed: a
    module's functions, a class's static and class methods with the marker above or below
    the decorator, and a plain instance's methods."""
    module = make_module(
        "fx_app_forms",
        """
        from fermix_core.hookspecs import hookimpl
        from fermix_core.specs import CommandSpec

        helper = len  # a callable that is not a hook

        @hookimpl
        def fermix_commands():
            return [CommandSpec(name="from_module", handler="x:y", help="m.")]
        """,
    )

    class Below:
        @staticmethod
        @hookimpl
        def fermix_commands():
            return [CommandSpec(name="static_below", handler="x:y", help="s.")]

    class Above:
        @hookimpl
        @classmethod
        def fermix_commands(cls):
            return [CommandSpec(name="class_above", handler="x:y", help="c.")]

    class Instance:
        @hookimpl
        def fermix_commands(self):
            return [CommandSpec(name="instance", handler="x:y", help="i.")]

    host = PluginHost()
    records = [
        host.register(module, "app.module"),
        host.register(Below, "app.below"),
        host.register(Above, "app.above"),
        host.register(Instance(), "app.instance"),
    ]
    assert [(r.status, r.hooks) for r in records] == [("loaded", ["fermix_commands"])] * 4
    names = set(host.collect().typed(CommandSpec))
    assert {"from_module", "static_below", "class_above", "instance"} <= names
    # A plugin registered after them is still scanned in full (nothing left over).
    late = host.register(make_module("fx_app_late", GOOD), "app.late")
    assert late.status == "loaded" and late.hooks == ["fermix_tools"]
    assert host.pm.candidates is None
