"""The job runner: isolated prompt, narrowed tools, deadlines, retries, probe, delivery.

Real SQLite store, real capability registry and agent loop, a real RouteChain over scripted
providers where routing matters, and a fake clock the tests advance — no sleeping.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.channel import ConversationKey
from fermix_core.home import FermixHome
from fermix_core.jobs.clock import FakeClock
from fermix_core.jobs.delivery import Deliverer
from fermix_core.jobs.runner import (
    RETRY_ATTEMPTS,
    JobRoute,
    JobRunner,
    probe_target,
    probe_tcp,
)
from fermix_core.jobs.scheduler import run_config, session_id_for
from fermix_core.jobs.store import SqliteJobStore
from fermix_core.messages import Message
from fermix_core.provider import ChatRequest, ErrorKind, ProviderError, ProviderSettings
from fermix_core.routing import RouteChain, RoutingCaller
from fermix_core.routing.records import Route, RoutePlan
from fermix_core.specs import PolicyClass, ProviderSpec, ToolSpec
from fermix_core.testing import FunctionProvider, ScriptedProvider, tool_call
from fermix_core.testing.jobs import T0, make_job
from fermix_core.tool import Tool, ToolContext
from fermix_core.traces import Tracer
from pydantic import BaseModel, ConfigDict

pytestmark = pytest.mark.anyio


class NoteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""


class Note(Tool[NoteArgs]):
    """Records the context it ran in, so a test can see what the run's tools were given."""

    seen: list[ToolContext] = []

    async def run(self, args: NoteArgs, ctx: ToolContext) -> str:
        Note.seen.append(ctx)
        return f"noted {args.text}"


def spec(name: str, policy: PolicyClass = PolicyClass.READ_ONLY) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=f"The {name} tool.",
        factory=Note,
        args_model=NoteArgs,
        policy=policy,
        read_only=policy in (PolicyClass.READ_ONLY, PolicyClass.OWNER_DATA_READ),
    )


SPECS = [
    spec("note"),
    spec("file_write", PolicyClass.WRITE),
    spec("list_jobs", PolicyClass.OWNER_DATA_READ),
    spec("subagents", PolicyClass.EXTERNAL_API),
]


def route(name: str, role: str) -> Route:
    provider_spec = ProviderSpec(name=name, factory="x.y:Z", default_model=f"{name}-m")
    settings = ProviderSettings(
        name=name, default_model=f"{name}-m", base_url=f"https://{name}.example:8443/v1"
    )
    return Route(name=name, spec=provider_spec, settings=settings, role=role)  # type: ignore[arg-type]


class Port:
    def __init__(self, fail: int = 0) -> None:
        self.sent: list[Any] = []
        self.fail = fail

    async def send(self, message: Any) -> Any:
        if self.fail:
            self.fail -= 1
            raise ConnectionError("platform said no")
        self.sent.append(message)


class Kit:
    def __init__(self, tmp_path: Path, store: SqliteJobStore) -> None:
        self.home = FermixHome(tmp_path / "home")
        self.home.ensure()
        self.store = store
        self.clock = FakeClock(T0)
        self.primary = ScriptedProvider(name="alpha")
        self.fallback = ScriptedProvider(name="beta")
        self.providers: dict[str, Any] = {"alpha": self.primary, "beta": self.fallback}
        self.plan = RoutePlan(route("alpha", "primary"), (route("beta", "fallback"),))
        self.ports: dict[str, Port] = {}
        self.probes: list[tuple[str, int]] = []
        self.probe_answers: list[bool] = []
        self.emitted: list[tuple[str, dict[str, Any]]] = []
        self.tracer = Tracer(self.home, capture_content=False)
        self.closed = 0

    async def routes(self, job: Any) -> JobRoute:
        chain = RouteChain(self.plan, self.providers, self.emit, sleep=self.clock.sleep)

        async def close() -> None:
            self.closed += 1

        return JobRoute(
            RoutingCaller(chain), probe_target(self.plan.primary.settings.base_url), close
        )

    async def probe(self, host: str, port: int, timeout: float) -> bool:
        self.probes.append((host, port))
        return self.probe_answers.pop(0) if self.probe_answers else True

    def emit(self, name: str, **data: Any) -> None:
        self.emitted.append((name, data))

    def runner(self, **kw: Any) -> JobRunner:
        registry = CapabilityRegistry(SPECS, deferral=False)
        deliverer = Deliverer(self.store, self.ports.get, self.clock, base_delay_s=5.0)
        return JobRunner(
            store=self.store,
            capabilities=registry,
            routes=self.routes,
            clock=self.clock,
            home=self.home,
            deliverer=deliverer,
            probe=self.probe,
            emit=self.emit,
            tracer=self.tracer,
            **kw,
        )

    async def claim(self, **job_fields: Any) -> tuple[Any, Any]:
        job = await self.store.create_job(make_job(**job_fields))
        run = await self.store.claim(
            job.id,
            now=self.clock.now(),
            trigger="manual",
            session_id=session_id_for(job.id, self.clock.now()),
            config=run_config(job, "manual"),
        )
        return job, run

    async def execute(self, runner: JobRunner, job: Any, run: Any) -> Any:
        await runner(job, run, "scheduled")
        return await self.store.get_run(run.id)


@pytest.fixture
async def kit(tmp_path: Path) -> AsyncIterator[Kit]:
    store = await SqliteJobStore.open(tmp_path / "memory.db")
    Note.seen.clear()
    yield Kit(tmp_path, store)
    await store.aclose()


async def test_an_isolated_run_with_its_own_prompt_and_memory_scope(kit: Kit) -> None:
    kit.primary.add(tool_call("note", {"text": "x"}), "All done: 3 headlines.")
    job, run = await kit.claim(task_prompt="Collect headlines", description="news")
    done = await kit.execute(kit.runner(), job, run)
    assert done.status == "succeeded"
    assert done.final_response == "All done: 3 headlines."
    assert done.attempts == 1
    assert done.delivery_status == "stored"  # make_job's default delivery is local
    first = kit.primary.requests[0]
    assert [m.role for m in first.messages] == ["system", "user"]  # no chat history
    system = first.messages[0].text
    assert "2027-01-15" in system  # T0's date, stamped
    assert "scheduled job" in system
    assert first.messages[1].text == "Collect headlines"
    assert done.prompt_snapshot == system
    assert all(r.inner_retry is False for r in kit.primary.requests)
    (ctx,) = Note.seen
    assert ctx.origin == "job"
    assert ctx.state["job_id"] == job.id
    assert ctx.attended is False
    assert "reply" not in ctx.services  # no chat to reply to
    assert done.usage is not None
    assert kit.closed == 1


async def test_traces_carry_the_cron_session_id(kit: Kit) -> None:
    kit.primary.add(tool_call("note"), "ok")
    job, run = await kit.claim()
    await kit.execute(kit.runner(), job, run)
    day_dirs = list(kit.home.traces.iterdir())
    llm = [json.loads(line) for d in day_dirs for line in (d / "llm_call.jsonl").open()]
    tools = [json.loads(line) for d in day_dirs for line in (d / "tool_exec.jsonl").open()]
    assert run.session_id == f"cron_{job.id}_{int(T0)}"
    assert {r["session_id"] for r in llm} == {run.session_id}
    assert {r["session_id"] for r in tools} == {run.session_id}


async def test_allowed_tools_narrow_and_guests_never_get_subagents(kit: Kit) -> None:
    runner = kit.runner()
    operator = make_job(allowed_tools=["note", "subagents"])
    assert set(runner.snapshot_for(operator, {}).specs) == {"note", "subagents"}
    full = runner.snapshot_for(make_job(), {})
    assert {"note", "file_write", "list_jobs", "subagents"} <= set(full.specs)
    guest = runner.snapshot_for(make_job(trust="guest"), {})
    assert set(guest.specs) == {"note"}
    wide = runner.snapshot_for(make_job(trust="guest", allowed_tools=["file_write", "note"]), {})
    assert set(wide.specs) == {"note"}  # allowed_tools can never widen the creator's trust


async def test_connection_unavailable_reruns_the_whole_loop_with_backoff(kit: Kit) -> None:
    down = ProviderError(ErrorKind.CONNECTION_UNAVAILABLE, "pool checkout failed")
    kit.primary.add(down, ProviderError(ErrorKind.CONNECTION_UNAVAILABLE, "again"), "back online")
    job, run = await kit.claim()
    runner = kit.runner()
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(runner, job, run))

        tg.start_soon(go)
        for delay in (2.0, 4.0):  # bounded exponential backoff on the injected clock
            await kit.clock.wait_for_sleepers(deadline=kit.clock.now() + delay)
            kit.clock.advance(delay)
    (done,) = result
    assert done.status == "succeeded"
    assert done.attempts == 3
    assert len(kit.primary.requests) == 3  # the chain never retried in place
    assert kit.fallback.requests == []  # connection_unavailable never fails over
    assert [d["attempt"] for n, d in kit.emitted if n == "jobs.retry"] == [1, 2]


async def test_the_whole_loop_retry_gives_up_after_its_budget(kit: Kit) -> None:
    for _ in range(RETRY_ATTEMPTS):
        kit.primary.add(ProviderError(ErrorKind.CONNECTION_UNAVAILABLE, "no network"))
    job, run = await kit.claim()
    runner = kit.runner()
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(runner, job, run))

        tg.start_soon(go)
        for n in range(RETRY_ATTEMPTS - 1):
            delay = 2.0 * 2**n
            await kit.clock.wait_for_sleepers(deadline=kit.clock.now() + delay)
            kit.clock.advance(delay)
    assert result[0].status == "failed"
    assert result[0].attempts == RETRY_ATTEMPTS


async def test_no_whole_loop_retry_once_a_tool_has_run(kit: Kit) -> None:
    kit.primary.add(
        tool_call("note", {"text": "side effect"}),
        ProviderError(ErrorKind.CONNECTION_UNAVAILABLE, "lost it"),
    )
    job, run = await kit.claim()
    done = await kit.execute(kit.runner(), job, run)
    assert done.status == "failed"
    assert done.attempts == 1
    assert "not repeated" in done.error
    assert len(Note.seen) == 1  # the tool ran once and was never replayed


async def test_the_job_route_fails_over_at_once_without_inner_retry(kit: Kit) -> None:
    kit.primary.add(ProviderError(ErrorKind.TIMEOUT, "slow"))
    kit.fallback.add("answer from beta")
    job, run = await kit.claim()
    done = await kit.execute(kit.runner(), job, run)
    assert done.status == "succeeded"
    assert done.provider == "beta"
    assert len(kit.primary.requests) == 1  # no same-route retry for jobs
    assert [n for n, _ in kit.emitted if n == "provider.retry"] == []


async def test_other_provider_errors_fail_the_run_with_a_readable_reason(kit: Kit) -> None:
    kit.primary.add(ProviderError(ErrorKind.AUTH, "bad key", status=401))
    job, run = await kit.claim()
    done = await kit.execute(kit.runner(), job, run)
    assert done.status == "failed"
    assert "fermix setup" in done.error
    assert done.attempts == 1


def _blocked_provider(name: str) -> FunctionProvider:
    async def never(request: ChatRequest) -> str:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return FunctionProvider(never, name=name)


async def test_timeout_seconds_stops_the_run(kit: Kit) -> None:
    kit.providers["alpha"] = _blocked_provider("alpha")
    job, run = await kit.claim(timeout_seconds=120)
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(kit.runner(), job, run))

        tg.start_soon(go)
        await kit.clock.wait_for_sleepers(deadline=T0 + 120)
        kit.clock.advance(120)
    (done,) = result
    assert done.status == "timed_out"
    assert "timeout of 120 s" in done.error
    assert done.config["timeout_seconds"] == 120


async def test_inactivity_watchdog_fails_a_stalled_run(kit: Kit) -> None:
    kit.providers["alpha"] = _blocked_provider("alpha")
    job, run = await kit.claim(timeout_seconds=1800, inactivity_timeout_seconds=60)
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(kit.runner(), job, run))

        tg.start_soon(go)
        await kit.clock.wait_for_sleepers(deadline=T0 + 60)
        kit.clock.advance(60)
    (done,) = result
    assert done.status == "timed_out"
    assert "no progress for 60 s" in done.error
    assert done.config["inactivity_timeout_seconds"] == 60


async def test_network_readiness_probe_runs_before_the_first_call(kit: Kit) -> None:
    kit.primary.add("ok")
    kit.probe_answers = [False, True]
    job, run = await kit.claim()
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(kit.runner(), job, run))

        tg.start_soon(go)
        await kit.clock.wait_for_sleepers(deadline=T0 + 1)
        assert kit.primary.requests == []  # still waiting for the network
        kit.clock.advance(1)
    assert kit.probes == [("alpha.example", 8443), ("alpha.example", 8443)]
    assert result[0].status == "succeeded"


async def test_network_readiness_can_be_turned_off(kit: Kit) -> None:
    kit.primary.add("ok")
    job, run = await kit.claim()
    await kit.execute(kit.runner(network_readiness=False), job, run)
    assert kit.probes == []


async def test_probe_tcp_against_real_loopback_sockets() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610
    assert await probe_tcp("127.0.0.1", port, 5.0) is True
    await listener.aclose()
    assert await probe_tcp("127.0.0.1", port, 5.0) is False


def test_probe_target_reads_base_urls() -> None:
    assert probe_target("https://api.openai.com/v1") == ("api.openai.com", 443)
    assert probe_target("http://localhost:11434/v1") == ("localhost", 11434)
    assert probe_target(None) is None
    assert probe_target("not a url") is None


async def test_delivery_to_a_channel_without_an_adapter_is_recorded(kit: Kit) -> None:
    kit.primary.add("report")
    target = {"channel": "telegram", "chat_id": "42", "thread_id": None}
    job, run = await kit.claim(delivery_mode="channel", delivery_target=target)
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(kit.runner(), job, run))

        tg.start_soon(go)
        for delay in (5.0, 10.0):
            await kit.clock.wait_for_sleepers(deadline=kit.clock.now() + delay)
            kit.clock.advance(delay)
    (done,) = result
    assert done.status == "succeeded"
    assert done.final_response == "report"  # kept on the run, never lost
    assert done.delivery_status == "failed"
    assert "no running adapter" in done.delivery_error
    assert done.delivery_attempts == 3


async def test_delivery_retries_then_sends_to_the_stored_target(kit: Kit) -> None:
    kit.primary.add("report")
    kit.ports["telegram"] = Port(fail=1)
    target = {"channel": "telegram", "chat_id": "42", "thread_id": "7"}
    job, run = await kit.claim(delivery_mode="origin", delivery_target=target)
    result: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            result.append(await kit.execute(kit.runner(), job, run))

        tg.start_soon(go)
        await kit.clock.wait_for_sleepers(deadline=kit.clock.now() + 5.0)
        kit.clock.advance(5.0)
    (done,) = result
    assert done.delivery_status == "delivered"
    assert done.delivery_attempts == 2
    (sent,) = kit.ports["telegram"].sent
    assert (sent.chat_id, sent.thread_id, sent.text) == ("42", "7", "report")


async def test_a_failed_run_is_delivered_as_a_notice(kit: Kit) -> None:
    kit.primary.add(ProviderError(ErrorKind.CONTEXT_LENGTH, "too long"))
    kit.ports["telegram"] = Port()
    target = {"channel": "telegram", "chat_id": "42", "thread_id": None}
    job, run = await kit.claim(delivery_mode="channel", delivery_target=target)
    done = await kit.execute(kit.runner(), job, run)
    assert done.status == "failed"
    assert "did not finish" in kit.ports["telegram"].sent[0].text


async def test_no_provider_configured_fails_the_run_clearly(kit: Kit) -> None:
    from fermix_core.routing import NoProviderConfigured

    async def none(job: Any) -> JobRoute:
        raise NoProviderConfigured("no provider configured — run `fermix setup`")

    runner = kit.runner()
    runner.routes = none
    job, run = await kit.claim()
    done = await kit.execute(runner, job, run)
    assert done.status == "failed"
    assert "fermix setup" in done.error


async def test_history_messages_are_never_sent(kit: Kit) -> None:
    kit.primary.add("fine")
    job, run = await kit.claim()
    await kit.execute(kit.runner(), job, run)
    assert all(isinstance(m, Message) for m in kit.primary.requests[0].messages)
    assert len(kit.primary.requests[0].messages) == 2


async def test_a_runs_transcript_is_kept_as_job_history_but_never_replayed(
    kit: Kit, tmp_path: Path
) -> None:
    from fermix_core.store import ConversationStore

    conversations = await ConversationStore.open(tmp_path / "memory.db")
    try:
        runner = kit.runner(conversations=conversations)
        kit.primary.add(tool_call("note", {"text": "a"}), "first result")
        job, run = await kit.claim()
        await kit.execute(runner, job, run)
        second = await kit.store.claim(
            job.id, now=T0 + 5, trigger="manual", session_id="cron_x_2", config=run.config
        )
        kit.primary.add("second result")
        await kit.execute(runner, job, second)
        assert len(kit.primary.requests[-1].messages) == 2  # still only system + task
        key = ConversationKey("job", job.id, None)
        window = await conversations.load_window(await conversations.conversation_id(key))
        texts = [m.message.text for m in window if m.message.role in ("user", "assistant")]
        assert texts[-2:] == ["Summarise the news", "second result"]
        assert "first result" in texts
        assert {m.speaker for m in window} == {"job"}
    finally:
        await conversations.close()


def skill_registry(tmp_path: Any, **packages: tuple[str, str]) -> Any:
    from fermix_core.skills import SkillRegistry, SkillRoot
    from fermix_core.tool import Trust

    for name, (root, front) in packages.items():
        folder = tmp_path / root / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: {name}\n{front}---\nSkill {name} steps.\n")
    return SkillRegistry(
        [
            SkillRoot(tmp_path / "local", Trust.OPERATOR, "local"),
            SkillRoot(tmp_path / "plugin", Trust.GUEST, "plugin x"),
        ]
    ).load()


async def test_skill_name_confines_the_run_and_a_missing_skill_fails_loud(
    kit: Kit, tmp_path: Any
) -> None:
    skills = skill_registry(
        tmp_path,
        narrow=("local", "description: d\nallowed_tools: [note, subagents]\n"),
        plugin=("plugin", "description: d\n"),
    )
    runner = kit.runner(skills=skills)
    bound = runner.snapshot_for(make_job(skill_name="narrow"), {})
    assert set(bound.specs) == {"note", "subagents"}
    # allowed_tools and the skill intersect; neither can widen the other.
    both = runner.snapshot_for(
        make_job(skill_name="narrow", allowed_tools=["note", "file_write"]), {}
    )
    assert set(both.specs) == {"note"}
    plugin = runner.snapshot_for(make_job(skill_name="plugin"), {})
    assert set(plugin.specs) == {"note"} and plugin.trust == "guest"
    kit.primary.add("done with the skill")
    job, run = await kit.claim(skill_name="narrow")
    done = await kit.execute(runner, job, run)
    assert done.status == "succeeded"
    assert "Skill narrow steps." in kit.primary.requests[0].messages[0].text
    job, run = await kit.claim(job_id="j2", skill_name="vanished")
    failed = await kit.execute(runner, job, run)
    assert failed.status == "failed" and "not loaded now" in failed.error
