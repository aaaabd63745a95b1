from __future__ import annotations

import time

import pytest
from fermix_core.authfile import AuthFileModeError, AuthStore
from fermix_core.config import ConfigError
from fermix_core.hookspecs import hookimpl
from fermix_core.runtime import Runtime
from fermix_core.specs import ProviderSpec


class Acme:
    def __init__(self) -> None:
        self.events: list[str] = []

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="acme", label="Acme", factory="acme.adapter:Acme", env_var="ACME_API_KEY"
        )

    @hookimpl
    async def fermix_startup(self, runtime):
        runtime.state["acme"] = "ready"
        self.events.append("start")

    @hookimpl
    def fermix_shutdown(self, runtime):
        self.events.append("stop")


def test_boot_validates_config_against_plugin_specs(fermix_home) -> None:
    fermix_home.config_file.write_text('[fermix_core.providers.acme]\nprimary = true\nwire = "x"\n')
    with pytest.raises(ConfigError) as info:
        Runtime.boot(fermix_home, plugins=[("providers.acme", Acme())], entry_points=False)
    assert "fermix_core.providers.acme.wire" in str(info.value)


def test_boot_refuses_an_auth_file_others_can_read(fermix_home) -> None:
    AuthStore(fermix_home.auth_file).put("anthropic_oauth", {"access_token": "t"})
    fermix_home.auth_file.chmod(0o644)
    with pytest.raises(AuthFileModeError) as info:
        Runtime.boot(fermix_home, entry_points=False)
    assert f"chmod 600 {fermix_home.auth_file}" in str(info.value)


@pytest.mark.anyio
async def test_startup_and_shutdown_reach_plugins(fermix_home) -> None:
    acme = Acme()
    fermix_home.config_file.write_text("[fermix_core.providers.acme]\nprimary = true\n")
    runtime = Runtime.boot(fermix_home, plugins=[("providers.acme", acme)], entry_points=False)
    assert runtime.config.provider_config("acme").primary is True
    assert await runtime.start() == []
    assert runtime.state["acme"] == "ready"
    assert await runtime.stop() == []
    assert acme.events == ["start", "stop"]
    assert await runtime.stop() == []  # idempotent


def test_settling_after_boot_freezes_and_raises_only_the_young_threshold() -> None:
    import gc

    from fermix_core.runtime import YOUNG_GC_THRESHOLD, settle_after_boot

    saved = gc.get_threshold()
    try:
        gc.set_threshold(700, 11, 12)
        settle_after_boot()
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD, 11, 12)
        assert gc.get_freeze_count() > 0
        gc.set_threshold(YOUNG_GC_THRESHOLD * 2, 11, 12)
        settle_after_boot()  # a higher threshold someone set on purpose is kept
        assert gc.get_threshold() == (YOUNG_GC_THRESHOLD * 2, 11, 12)
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)


class Listener:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    @hookimpl
    def fermix_event(self, event):
        self.events.append((event.name, dict(event.data)))


def test_the_emitter_reaches_the_same_observers_as_emit_in_one_call(fermix_home) -> None:
    listener = Listener()
    runtime = Runtime.boot(fermix_home, plugins=[("listener", listener)], entry_points=False)
    emitter = runtime.emitter
    assert emitter == runtime.host.telemetry.emit, "the booted host: its fan-out itself"
    seen: list[str] = []
    runtime.host.telemetry.subscribe(lambda event: seen.append(event.name))
    event = emitter("agent.tool_call", tool="x", ok=True)
    runtime.emit("channel.message", channel="cli")
    assert event.name == "agent.tool_call" and event.data == {"tool": "x", "ok": True}
    assert abs(event.at - time.time()) < 3600, "stamped with the wall clock when emitted"
    assert listener.events == [
        ("agent.tool_call", {"tool": "x", "ok": True}),
        ("channel.message", {"channel": "cli"}),
    ]
    assert seen == ["agent.tool_call", "channel.message"]


def test_a_host_whose_emit_was_replaced_keeps_the_long_way(fermix_home) -> None:
    runtime = Runtime.boot(fermix_home, entry_points=False)
    calls: list[str] = []
    runtime.host.emit = lambda name, **data: calls.append(name)
    emitter = runtime.emitter
    assert emitter == runtime.emit
    emitter("agent.tool_call", tool="x")
    assert calls == ["agent.tool_call"]
