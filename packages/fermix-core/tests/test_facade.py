"""The runtime facade lifecycle hooks get: ingest, reply ports, tasks, secrets, config."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
from fermix_core.api import Fermix
from fermix_core.channel import Channel, InboundMessage, OutboundMessage, SentMessage
from fermix_core.channels.runtime import ChannelRuntime
from fermix_core.config.secret import SecretField
from fermix_core.facade import ServiceHost, ServiceUnavailable
from fermix_core.hookspecs import hookimpl
from fermix_core.specs import ChannelSpec, ModelInfo, ProviderSpec
from fermix_core.testing import FunctionProvider
from pydantic import BaseModel, ConfigDict

pytestmark = pytest.mark.anyio

GUARD = 60  # seconds: a hang guard, not a timing assertion


def answer(request) -> str:
    return f"model saw: {request.messages[-1].text}"


class ModelPlugin:
    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="fn",
            factory=lambda spec, settings: FunctionProvider(answer, name="fn", model="fn-1"),
            keyless=True,
            needs_server=False,
            default_model="fn-1",
            models=(ModelInfo(id="fn-1", context_window=8_000),),
        )


CONFIG = {"fermix_core": {"providers": {"fn": {"primary": True}}}}


def open_fermix(tmp_path, *plugins: tuple[str, Any]):
    """An embedded Fermix on the in-process model plus *plugins*, nothing installed."""
    return Fermix.open(
        home=tmp_path / "home",
        config=CONFIG,
        environ={},
        plugins=[("providers.fn", ModelPlugin()), *plugins],
        entry_points=False,
    )


class Feeder:
    """A lifecycle-only plugin that feeds the gateway from a background task."""

    def __init__(self) -> None:
        self.host: ServiceHost | None = None
        self.replies: list[OutboundMessage] = []
        self.answered = anyio.Event()
        self.crashed_ran = anyio.Event()
        self.events: list[str] = []

    @hookimpl
    async def fermix_startup(self, runtime: ServiceHost) -> None:
        self.host = runtime
        runtime.state["feeder"] = "up"
        runtime.task_group.start_soon(self._crash, name="feeder crash")
        runtime.task_group.start_soon(self._feed, name="feeder")

    async def _crash(self) -> None:
        self.crashed_ran.set()
        raise RuntimeError("a plugin task that blows up")

    async def _feed(self) -> None:
        assert self.host is not None
        await self.crashed_ran.wait()

        async def send(message: OutboundMessage) -> None:
            self.replies.append(message)
            self.answered.set()

        port = self.host.reply_port(send)
        message = InboundMessage(
            channel="cli", chat_id="feeder", sender_id="local", text="ping", local=True
        )
        outcome = await self.host.ingest(message, port)
        self.events.append(str(outcome.status))
        try:
            await anyio.sleep_forever()
        finally:
            self.events.append("task cancelled")

    @hookimpl
    def fermix_event(self, event) -> None:
        if event.name == "plugin.task_failed":
            self.events.append(f"failed {event.data['task']}")

    @hookimpl
    def fermix_shutdown(self, runtime: ServiceHost) -> None:
        # Shutdown runs while the plugin's tasks still run; they are cancelled after it.
        self.events.append("shutdown")


async def test_a_startup_hook_feeds_the_gateway_from_a_supervised_task(tmp_path, caplog) -> None:
    feeder = Feeder()
    caplog.set_level(logging.ERROR, logger="fermix.plugins")
    async with open_fermix(tmp_path, ("apps.feeder", feeder)) as fx:
        with anyio.fail_after(GUARD):
            await feeder.answered.wait()
        assert [m.text for m in feeder.replies] == ["model saw: ping"]
        assert feeder.host is fx.host
        assert fx.host.state["feeder"] == "up"
        assert fx.host.config.provider_config("fn").primary is True
        # The crashed task was logged and reported; the service still answers.
        assert "failed feeder crash" in feeder.events
        assert "a plugin task that blows up" in caplog.text
        assert (await fx.ask("still up?")).text == "model saw: still up?"
    assert feeder.events[-2:] == ["shutdown", "task cancelled"]
    assert "queued" in feeder.events


async def test_reply_port_for_a_channel_that_is_not_running_says_so(tmp_path) -> None:
    async with open_fermix(tmp_path) as fx:
        with pytest.raises(ServiceUnavailable, match="'telegram' is not running"):
            fx.host.reply_port("telegram")
        with pytest.raises(TypeError, match="channel name"):
            fx.host.reply_port(42)


async def test_a_port_over_an_adapter_object_renders_and_delivers_a_turn(tmp_path) -> None:
    class Screen(Channel):
        """An app's own surface: a Channel object it drives itself (no receive loop)."""

        name = "screen"
        dialect = "plain"

        def __init__(self) -> None:
            self.sent: list[OutboundMessage] = []

        async def start(self, host) -> None:
            pass

        async def stop(self) -> None:
            pass

        async def send(self, message: OutboundMessage) -> SentMessage:
            self.sent.append(message)
            return SentMessage(message_id=str(len(self.sent)))

    screen = Screen()
    async with open_fermix(tmp_path) as fx:
        port = fx.host.reply_port(screen)
        message = InboundMessage(
            channel="cli", chat_id="kiosk", sender_id="local", text="**bold** hi", local=True
        )
        outcome = await fx.host.ingest(message, port)
        assert outcome.job is not None
        with anyio.fail_after(GUARD):
            await outcome.job.done.wait()
    assert [(m.chat_id, m.text) for m in screen.sent] == [("kiosk", "model saw: bold hi")]


async def test_a_runtime_started_without_a_service_has_no_gateway_or_tasks(fermix_home) -> None:
    from fermix_core.runtime import Runtime

    runtime = Runtime.boot(fermix_home, environ={}, entry_points=False)
    host = runtime.service_host
    with pytest.raises(ServiceUnavailable, match="task group"):
        _ = host.task_group
    message = InboundMessage(channel="cli", chat_id="x", sender_id="local", text="hi", local=True)
    with pytest.raises(ServiceUnavailable, match="gateway is not running"):
        await host.ingest(message, host.reply_port(lambda m: None))


class Vault:
    """A plugin secret store: answers for one env name only."""

    @hookimpl
    def fermix_resolve_secret(self, request) -> str | None:
        return "from-the-vault" if request.env == "VAULTED_TOKEN" else None


async def test_the_facade_s_secret_resolver_consults_plugin_hooks(tmp_path) -> None:
    field = SecretField(("fermix_channels", "vaulted", "token"), "VAULTED_TOKEN", "@keyring")
    async with open_fermix(tmp_path, ("secrets.vault", Vault())) as fx:
        resolved = await anyio.to_thread.run_sync(fx.host.secrets.resolve, field)
    assert (resolved.value, resolved.source) == ("from-the-vault", "plugin")


class VaultedConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    token: str | None = "@keyring"
    owner_user_id: str | None = "owner"


class VaultedChannel(Channel):
    """Resolves its token through the host at start, as first-party adapters do."""

    name = "vaulted"
    instances: list[VaultedChannel] = []

    def __init__(self, *, config: Any, **_: Any) -> None:
        self.config = config
        self.token: str | None = None
        self.service: Any = None
        self.started = anyio.Event()
        VaultedChannel.instances.append(self)

    async def start(self, host) -> None:
        field = SecretField(("fermix_channels", "vaulted", "token"), "VAULTED_TOKEN", "@keyring")
        resolved = await anyio.to_thread.run_sync(host.secrets.resolve, field)
        self.token = resolved.value
        self.service = host.service
        self.started.set()

    async def stop(self) -> None:
        pass

    async def send(self, message: OutboundMessage) -> SentMessage:
        return SentMessage(message_id="1")


async def test_channel_hosts_carry_the_same_facade_and_a_hook_aware_resolver(
    fermix_home,
) -> None:
    from fermix_core.runtime import Runtime
    from fermix_core.service import FermixService

    class Plugin:
        @hookimpl
        def fermix_channels(self):
            yield ChannelSpec(name="vaulted", factory=VaultedChannel, config_model=VaultedConfig)

    VaultedChannel.instances.clear()
    runtime = Runtime.boot(
        fermix_home,
        environ={},
        plugins=[("providers.fn", ModelPlugin()), ("channels.vaulted", Plugin()), ("v", Vault())],
        entry_points=False,
        config=CONFIG,
    )
    async with FermixService.running(runtime) as service, runtime.serving(service):
        channels = ChannelRuntime.from_runtime(runtime, service.gateway)
        async with channels.running():
            service.channels = channels  # as the daemon does once channels run
            [channel] = VaultedChannel.instances
            with anyio.fail_after(GUARD):
                await channel.started.wait()
            await channels.wait_for("vaulted", "ready", timeout=GUARD)
            port = runtime.service_host.reply_port("vaulted")
            assert port is channels.slots["vaulted"].port
    assert channel.token == "from-the-vault"
    assert channel.service is runtime.service_host
