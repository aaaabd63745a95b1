"""The channel runtime: build from specs, supervise, restart with backoff, health, refusal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.channel import (
    Channel,
    ChannelHost,
    DeliveryResult,
    DeliveryUnavailable,
    InboundMessage,
    OutboundMessage,
    SentMessage,
    WebhookRequest,
    WebhookResponse,
    WebhookRoute,
)
from fermix_core.channels.idempotency import SeenIds
from fermix_core.channels.runtime import Backoff, ChannelRuntime, build_problem
from fermix_core.gateway.types import IngestOutcome, IngestStatus
from fermix_core.home import FermixHome
from fermix_core.specs import ChannelSpec

pytestmark = pytest.mark.anyio

FAST = Backoff(base=0.001, cap=0.01)


class Config:
    """The one method of LoadedConfig the runtime reads."""

    def __init__(self, sections: dict[str, Any]) -> None:
        self.sections = sections

    def section(self, path: str) -> Any:
        return self.sections.get(path.removeprefix("fermix_channels."))


class Gateway:
    def __init__(self) -> None:
        self.ingested: list[InboundMessage] = []
        self.fail: BaseException | None = None
        self.status = IngestStatus.QUEUED
        self.ports: list[Any] = []

    async def ingest(self, message: InboundMessage, reply: Any) -> IngestOutcome:
        if self.fail is not None:
            raise self.fail
        self.ingested.append(message)
        self.ports.append(reply)
        return IngestOutcome(self.status)


class Platform:
    """What the fake adapters talk to: a queue of inbound texts and a log of events."""

    def __init__(self) -> None:
        self.send_inbound, self.receive_inbound = anyio.create_memory_object_stream[str](100)
        self.log: list[str] = []
        self.sent: list[OutboundMessage] = []


class Looping(Channel):
    """Receives in a loop on the host's task group; ``crash`` as a text raises in the loop."""

    def __init__(self, name: str, platform: Platform, **kwargs: Any) -> None:
        self.name = name
        self.platform = platform
        self.kwargs = kwargs
        self.starts = 0
        self.stops = 0
        self.host: ChannelHost | None = None

    async def start(self, host: ChannelHost) -> None:
        self.starts += 1
        self.host = host
        self.platform.log.append(f"start {self.name}")
        host.task_group.start_soon(self._loop)

    async def _loop(self) -> None:
        async for text in self.platform.receive_inbound:
            if text == "crash":
                raise RuntimeError("the platform socket broke")
            assert self.host is not None
            await self.host.deliver(
                InboundMessage(
                    channel=self.name, chat_id="c", sender_id="owner", text=text, message_id=text
                )
            )

    async def stop(self) -> None:
        self.stops += 1
        self.platform.log.append(f"stop {self.name}")

    async def send(self, message: OutboundMessage) -> SentMessage:
        self.platform.sent.append(message)
        return SentMessage(message_id=str(len(self.platform.sent)))


class FailingStart(Looping):
    def __init__(self, name: str, platform: Platform, failures: int, **kwargs: Any) -> None:
        super().__init__(name, platform, **kwargs)
        self.failures = failures
        self.attempts = 0

    async def start(self, host: ChannelHost) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise ConnectionError(f"login refused (attempt {self.attempts})")
        await super().start(host)


class Hanging(Looping):
    async def start(self, host: ChannelHost) -> None:
        if self.starts == 0:
            self.starts += 1
            await anyio.sleep_forever()
        await super().start(host)


class Webhook(Looping):
    async def start(self, host: ChannelHost) -> None:
        self.host = host

    def webhook_routes(self) -> list[WebhookRoute]:
        async def handle(request: WebhookRequest) -> WebhookResponse:
            return WebhookResponse(202, b"handled")

        return [WebhookRoute("/webhook/hook", ("GET", "POST"), handle)]


def spec(name: str, factory: Any, **kwargs: Any) -> ChannelSpec:
    return ChannelSpec(name=name, factory=factory, **kwargs)


OWNER = {"enabled": True, "owner_user_id": "owner"}


def runtime(
    specs: list[ChannelSpec], sections: dict[str, Any], tmp_path: Path, **kwargs: Any
) -> ChannelRuntime:
    kwargs.setdefault("gateway", Gateway())
    kwargs.setdefault("backoff", FAST)
    return ChannelRuntime(
        specs, config=Config(sections), home=FermixHome(tmp_path), http="shared-client", **kwargs
    )


async def test_builds_with_keyword_arguments_and_delivers(tmp_path: Path) -> None:
    platform = Platform()
    built: list[Looping] = []

    def factory(**kwargs: Any) -> Looping:
        built.append(Looping("one", platform, **kwargs))
        return built[-1]

    gateway = Gateway()
    rt = runtime([spec("one", factory)], {"one": OWNER}, tmp_path, gateway=gateway)
    async with rt.running():
        await rt.wait_for("one", "ready")
        await platform.send_inbound.send("hello")
        await platform.send_inbound.send("again")
        with anyio.fail_after(10):
            while len(gateway.ingested) < 2:
                await anyio.lowlevel.checkpoint()
    (adapter,) = built
    assert set(adapter.kwargs) == {"config", "http", "home"}
    assert adapter.kwargs["config"] == OWNER
    assert adapter.kwargs["http"] == "shared-client"
    assert adapter.kwargs["home"].path == tmp_path
    assert [m.text for m in gateway.ingested] == ["hello", "again"]
    health = {h["name"]: h for h in rt.health()}["one"]
    assert health["state"] == "stopped"
    assert health["last_inbound"] is not None
    assert adapter.stops == 1


async def test_a_crashing_receive_loop_is_restarted_with_backoff(tmp_path: Path) -> None:
    platform = Platform()
    adapter = Looping("one", platform)
    other_platform = Platform()
    other = Looping("two", other_platform)
    rt = runtime(
        [spec("one", lambda **_: adapter), spec("two", lambda **_: other)],
        {"one": OWNER, "two": OWNER},
        tmp_path,
    )
    async with rt.running():
        await rt.wait_for("one", "ready")
        await rt.wait_for("two", "ready")
        await platform.send_inbound.send("crash")
        health = await rt.wait_for("one", "ready", restarts=1)
        assert "the platform socket broke" in (health.error or "") or health.error is None
        assert adapter.starts == 2
        assert adapter.stops == 1  # stopped before the restart
        # The other channel never noticed.
        assert other.starts == 1
        assert {h["name"]: h["state"] for h in rt.health()}["two"] == "ready"
    assert adapter.stops == 2


async def test_start_failures_degrade_then_recover(tmp_path: Path) -> None:
    platform = Platform()
    adapter = FailingStart("one", platform, failures=3)
    states: list[tuple[str, str | None]] = []

    def emit(name: str, **data: Any) -> None:
        if name == "channel.health":
            states.append((data["state"], data["error"]))

    rt = runtime([spec("one", lambda **_: adapter)], {"one": OWNER}, tmp_path, emit=emit)
    async with rt.running():
        health = await rt.wait_for("one", "ready", restarts=3)
    assert health.restarts == 3
    assert adapter.attempts == 4
    assert adapter.stops == 4  # after every failed start, and once at the end
    degraded = [error for state, error in states if state == "degraded"]
    assert len(degraded) == 3
    assert "login refused (attempt 1)" in degraded[0]


async def test_a_hanging_start_times_out_and_is_retried(tmp_path: Path) -> None:
    platform = Platform()
    adapter = Hanging("one", platform)
    rt = runtime([spec("one", lambda **_: adapter)], {"one": OWNER}, tmp_path, start_timeout=0.2)
    async with rt.running():
        health = await rt.wait_for("one", "ready", restarts=1)
    assert adapter.starts == 2
    assert health.restarts == 1


async def test_stopped_in_reverse_order(tmp_path: Path) -> None:
    platform = Platform()
    names = ["a", "b", "c"]
    adapters = {n: Looping(n, platform) for n in names}
    rt = runtime(
        [spec(n, lambda n=n, **_: adapters[n]) for n in names],
        dict.fromkeys(names, OWNER),
        tmp_path,
    )
    async with rt.running():
        for n in names:
            await rt.wait_for(n, "ready")
    stops = [line for line in platform.log if line.startswith("stop")]
    assert stops == ["stop c", "stop b", "stop a"]


async def test_enablement_defaults_and_refusal(tmp_path: Path) -> None:
    platform = Platform()
    built: list[str] = []

    def make(name: str):
        def factory(**_: Any) -> Looping:
            built.append(name)
            return Webhook(name, platform) if name == "hook" else Looping(name, platform)

        return factory

    specs = [
        spec("ondefault", make("ondefault"), enabled_by_default=True),
        spec("offdefault", make("offdefault")),
        spec("local", make("local"), remote=False, enabled_by_default=True),
        spec("hook", make("hook")),
        spec("nobody", make("nobody"), enabled_by_default=True),
    ]
    sections = {
        "ondefault": {"owner_user_id": "owner"},  # no `enabled`: the spec's default (on)
        "hook": {"enabled": True},  # on, but authorizes nobody
    }
    rt = runtime(specs, sections, tmp_path)
    async with rt.running():
        await rt.wait_for("ondefault", "ready")
        await rt.wait_for("local", "ready")
        states = {h["name"]: h for h in rt.health()}
        routes = rt.webhook_routes()
        ((name, route),) = routes
        assert name == "hook" and route.path == "/webhook/hook"
        get = await route.handler(WebhookRequest("GET", route.path, {}, {}, b""))
        post = await route.handler(WebhookRequest("POST", route.path, {}, {}, b"{}"))
    assert states["offdefault"]["state"] == "stopped" and not states["offdefault"]["enabled"]
    assert states["hook"]["state"] == "refused"
    assert "owner_user_id" in states["hook"]["error"]
    assert states["nobody"]["state"] == "refused"
    assert states["local"]["state"] in ("ready", "stopped")
    assert "offdefault" not in built
    # The refused webhook channel was built (its routes are served) but never started.
    assert "start hook" not in platform.log
    assert get.status == 403
    assert post.status == 200 and post.body == b""


async def test_unbuildable_adapters_are_reported_with_the_fix(tmp_path: Path) -> None:
    specs = [
        spec("missingdep", "fermix_core.testing.not_a_module_xyz:Adapter"),
        spec("badfactory", lambda **_: object()),
        spec("oldstyle", lambda: Looping("oldstyle", Platform())),
    ]
    sections = {n.name: OWNER for n in specs}
    sources = {
        "missingdep": "channels.missingdep (fermix-channels 0.1.0)",
        "badfactory": "acme (fermix-acme 1.0)",
    }
    rt = runtime(specs, sections, tmp_path, sources=sources)
    async with rt.running():
        states = {h["name"]: h for h in rt.health()}
    for name in ("missingdep", "badfactory", "oldstyle"):
        assert states[name]["state"] == "refused", name
    assert (
        "has no adapter module 'fermix_core.testing.not_a_module_xyz'"
        in (states["missingdep"]["error"])
    )
    assert "report it to acme (fermix-acme 1.0)" in states["badfactory"]["error"]
    assert "not a fermix_core.channel.Channel" in states["badfactory"]["error"]
    assert "enabled = false" in states["oldstyle"]["error"]


def test_a_missing_dependency_names_the_extra() -> None:
    error = ModuleNotFoundError("No module named 'slack_sdk'", name="slack_sdk")
    message = build_problem(
        spec("slack", "fermix_channels.slack.adapter:SlackChannel"),
        "channels.slack (fermix-channels 0.1.0)",
        error,
    )
    assert 'pip install "fermix-channels[slack]"' in message
    assert "'slack_sdk'" in message


async def test_duplicates_are_dropped_durably_and_failed_hand_offs_released(
    tmp_path: Path,
) -> None:
    platform = Platform()
    adapter = Looping("one", platform)
    gateway = Gateway()
    async with await SeenIds.open(tmp_path / "memory.db") as seen:
        rt = runtime(
            [spec("one", lambda **_: adapter)],
            {"one": OWNER},
            tmp_path,
            gateway=gateway,
            seen_ids=seen,
        )
        async with rt.running():
            await rt.wait_for("one", "ready")
            host = adapter.host
            assert host is not None

            def msg(mid: str, sender: str = "owner") -> InboundMessage:
                return InboundMessage(
                    channel="one", chat_id="c", sender_id=sender, text="t", message_id=mid
                )

            assert await host.deliver(msg("m1")) is DeliveryResult.ACCEPTED
            assert await host.deliver(msg("m1")) is DeliveryResult.DUPLICATE
            assert await host.seen("m1")
            gateway.fail = OSError("queue closed")
            with pytest.raises(DeliveryUnavailable):
                await host.deliver(msg("m2"))
            assert not await host.seen("m2")
            gateway.fail = None
            gateway.status = IngestStatus.UNAVAILABLE
            with pytest.raises(DeliveryUnavailable, match="restarting"):
                await host.deliver(msg("m2"))
            gateway.status = IngestStatus.DROPPED
            assert await host.deliver(msg("m2", "stranger")) is DeliveryResult.DROPPED
            gateway.status = IngestStatus.QUEUED
            with pytest.raises(ValueError, match="labelled"):
                await host.deliver(InboundMessage(channel="x", chat_id="c", sender_id="s"))
            with pytest.raises(ValueError, match="unknown state"):
                host.report("sleeping")
        # m2 reached the gateway twice: the "restarting" answer released it for the retry.
        assert [m.message_id for m in gateway.ingested] == ["m1", "m2", "m2"]
    # A restart keeps the record.
    async with await SeenIds.open(tmp_path / "memory.db") as seen:
        assert await seen.seen("one", "m1")


async def test_a_stopping_daemon_answers_unavailable(tmp_path: Path) -> None:
    platform = Platform()
    adapter = Looping("one", platform)
    available = [True]
    rt = runtime(
        [spec("one", lambda **_: adapter)], {"one": OWNER}, tmp_path, available=lambda: available[0]
    )
    async with rt.running():
        await rt.wait_for("one", "ready")
        available[0] = False
        assert adapter.host is not None
        with pytest.raises(DeliveryUnavailable, match="stopping"):
            await adapter.host.deliver(
                InboundMessage(channel="one", chat_id="c", sender_id="owner", text="x")
            )


async def test_reply_port_records_outbound_and_offers_reactions(tmp_path: Path) -> None:
    platform = Platform()
    adapter = Looping("one", platform)
    gateway = Gateway()
    rt = runtime([spec("one", lambda **_: adapter)], {"one": OWNER}, tmp_path, gateway=gateway)
    async with rt.running():
        await rt.wait_for("one", "ready")
        await platform.send_inbound.send("hi")
        with anyio.fail_after(10):
            while not gateway.ports:
                await anyio.lowlevel.checkpoint()
        port = gateway.ports[0]
        await port.send(OutboundMessage(chat_id="c", text="answer"))
        health = {h["name"]: h for h in rt.health()}["one"]
    assert health["last_outbound"] is not None
    assert port.features.reactions is None  # Looping declares no reactions
    assert [m.text for m in platform.sent] == ["answer"]


def test_backoff_is_capped_and_jittered() -> None:
    backoff = Backoff(base=1.0, cap=60.0, jitter=0.5)
    assert backoff.delay(0, rand=lambda: 0.0) == 1.0
    assert backoff.delay(3, rand=lambda: 0.0) == 8.0
    assert backoff.delay(50, rand=lambda: 0.0) == 60.0
    assert backoff.delay(50, rand=lambda: 1.0) == 30.0


async def test_a_default_on_channel_this_install_cannot_build_is_quiet_until_configured(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fresh install that lacks a default-on channel's extra is not an error; a configured
    one that cannot be built is."""
    missing = "fermix_nonexistent_adapter_module:make"
    specs = [
        spec("quiet", missing, enabled_by_default=True, remote=False),
        spec("loud", missing, enabled_by_default=True, remote=False),
    ]
    rt = runtime(specs, {"loud": {"enabled": True}}, tmp_path)
    with caplog.at_level(logging.INFO, logger="fermix.channels"):
        async with rt.running():
            states = {h["name"]: h for h in rt.health()}
    assert not states["quiet"]["enabled"] and states["quiet"]["state"] == "stopped"
    assert states["loud"]["enabled"] and states["loud"]["state"] == "refused"
    levels = {r.levelno for r in caplog.records if "'quiet'" in r.getMessage()}
    assert levels == {logging.INFO}
    assert any(r.levelno == logging.ERROR and "'loud'" in r.getMessage() for r in caplog.records)


async def test_typing_shows_only_for_a_turn_that_runs_a_while(monkeypatch) -> None:
    """Queued turns show no indicator; a running one does, renewed until it is done."""
    from fermix_core.channels import runtime as channel_runtime
    from fermix_core.gateway.types import TurnJob

    monkeypatch.setattr(channel_runtime, "TYPING_AFTER", 0.01)
    calls: list[tuple[str, bool]] = []
    typed = anyio.Event()
    rechecked = anyio.Event()

    def job_for(chat: str) -> Any:
        message = InboundMessage(channel="fake", chat_id=chat, sender_id=chat, text="hi")
        return TurnJob(message=message, trust=None, reply=None)  # type: ignore[arg-type]

    queued, running, instant = job_for("queued"), job_for("running"), job_for("instant")
    running.started = True

    async def typing(chat_id: str, thread_id: str | None = None) -> None:
        jobs = {"queued": queued, "running": running, "instant": instant}
        calls.append((chat_id, jobs[chat_id].started))
        if chat_id == "running" and len([c for c in calls if c[0] == "running"]) >= 2:
            typed.set()

    class Spy(channel_runtime._Typist):
        def _push(self, when: float, entry: Any) -> None:
            if entry.job is queued and self._order >= 3:
                rechecked.set()  # the queued turn was looked at again, still not started
            super()._push(when, entry)

    async with anyio.create_task_group() as tg:
        typist = Spy(tg)
        instant.done.set()
        for job in (queued, running, instant):
            typist.watch(typing, job.message, job, every=0.01)
        with anyio.fail_after(30):
            await typed.wait()  # renewed while it runs
            await rechecked.wait()
        running.done.set()
        queued.started = True
        with anyio.fail_after(30):
            while not any(chat == "queued" for chat, _ in calls):
                await rechecked.wait()
                rechecked = anyio.Event()
        queued.done.set()
        tg.cancel_scope.cancel()
    assert all(chat != "instant" for chat, _ in calls)  # done before its first check
    assert all(started for _, started in calls)  # never for a turn still queued


async def test_typing_indicators_are_rate_limited_per_channel(monkeypatch) -> None:
    """A flood of slow turns does not turn into a flood of typing calls."""
    from fermix_core.channels import runtime as channel_runtime
    from fermix_core.gateway.types import TurnJob

    monkeypatch.setattr(channel_runtime, "TYPING_AFTER", 0.0)
    typed: list[str] = []
    settled, called = anyio.Event(), anyio.Event()

    async def typing(chat_id: str, thread_id: str | None = None) -> None:
        typed.append(chat_id)
        called.set()

    class Spy(channel_runtime._Typist):
        def _push(self, when: float, entry: Any) -> None:
            super()._push(when, entry)
            if self.skipped >= 4:
                settled.set()

    jobs = []
    for n in range(5):
        message = InboundMessage(channel="fake", chat_id=f"c{n}", sender_id=f"c{n}", text="hi")
        job = TurnJob(message=message, trust=None, reply=None)  # type: ignore[arg-type]
        job.started = True
        jobs.append(job)
    async with anyio.create_task_group() as tg:
        typist = Spy(tg, rate=1.0)  # one per second, a burst of one
        for job in jobs:
            typist.watch(typing, job.message, job, every=60.0)
        with anyio.fail_after(30):
            await settled.wait()
            await called.wait()  # the allowed call runs in its own task
        for job in jobs:
            job.done.set()
        tg.cancel_scope.cancel()
    assert len(typed) == 1 and typist.skipped == 4
