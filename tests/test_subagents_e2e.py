"""Skills and sub-agents in the whole in-process runtime: prompt, /ultra, routing, /stop.

The provider is an in-process plugin; the skill and delegation tools are the real
fermix-tools plugin loaded from its entry point, so the workers here are spawned by the
service's own Delegator over ``purpose="subagent"`` routes.
"""

from __future__ import annotations

import json

import anyio
import pytest
from fermix_core.api import Fermix
from fermix_core.channel import InboundMessage
from fermix_core.gateway import ChannelFeatures
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn
from fermix_core.service import CollectingReply
from fermix_core.specs import ModelInfo, ProviderSpec, SkillDirSpec
from fermix_core.testing import FunctionProvider

pytestmark = pytest.mark.anyio

WORKER = "You are a sub-agent of Fermix"


class Harness:
    def __init__(self) -> None:
        self.requests = []
        self.parent = lambda request: Turn(content="ok", model="m1")
        self.worker = lambda request: Turn(content="worker ok", model="m1")
        self.provider = FunctionProvider(self._answer, name="harness")

    async def _answer(self, request):
        self.requests.append(request)
        if WORKER in request.messages[0].text:
            result = self.worker(request)
        else:
            result = self.parent(request)
        if hasattr(result, "__await__"):
            result = await result
        return result

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="elsewhere",
            label="Elsewhere",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="far-model",
            models=(ModelInfo(id="far-model", context_window=100_000),),
        )
        yield ProviderSpec(
            name="harness",
            label="Harness",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(
                ModelInfo(id="m1", context_window=100_000),
                ModelInfo(id="m-small", context_window=100_000),
            ),
        )


def config(**routing):
    return {
        "fermix_core": {
            "providers": {"harness": {"primary": True, "base_url": "http://127.0.0.1:9/unused"}},
            "memory": {"review_enabled": False},
            **({"routing": routing} if routing else {}),
        },
        "fermix_channels": {"telegram": {"owner_user_id": "1", "allowed_user_ids": ["1", "2"]}},
    }


@pytest.fixture
async def fx(fermix_home):
    harness = Harness()
    async with Fermix.open(
        fermix_home, config=config(), plugins=[("providers.harness", harness)]
    ) as fx:
        fx.harness = harness
        yield fx


async def telegram(fx, sender: str, text: str, wait: bool = True):
    reply = CollectingReply(ChannelFeatures())
    message = InboundMessage(channel="telegram", chat_id="chat", sender_id=sender, text=text)
    outcome = await fx.service.gateway.ingest(message, reply)
    if wait and outcome.job is not None:
        await outcome.job.done.wait()
    return outcome, reply


def fan_out(tasks, **extra):
    calls = [ToolCall(id="c1", name="subagents", arguments={"tasks": tasks, **extra})]
    return Turn(content="", tool_calls=calls, model="m1")


def scripted(*turns):
    queue = list(turns)
    return lambda request: queue.pop(0)(request) if callable(queue[0]) else queue.pop(0)


async def test_prompt_lists_skills_for_the_owner_and_guests_get_no_delegation(fx) -> None:
    await telegram(fx, "1", "hello")
    owner = fx.harness.requests[-1]
    assert "## Skills" in owner.messages[0].text
    assert "- self-knowledge — Use when the user asks what Fermix is" in owner.messages[0].text
    assert {"subagents", "skill_view", "skill_run"} <= {t.name for t in owner.tools}
    await telegram(fx, "2", "hello")
    guest = fx.harness.requests[-1]
    assert "## Skills" not in guest.messages[0].text
    assert not {t.name for t in guest.tools} & {"subagents", "skill_view", "skill_run"}


async def test_ultra_turn_fans_out_thirty_probes_at_most_twelve_at_once(fx) -> None:
    state = {"active": 0, "peak": 0, "started": 0}
    gate = anyio.Event()
    seen = {}

    async def worker(request):
        state["started"] += 1
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])
        if state["active"] >= 12 or state["started"] == 30:
            gate.set()
        await gate.wait()
        state["active"] -= 1
        return Turn(content="probe ok", model="m1")

    closed = anyio.Event()

    def closing(request):
        seen.update(json.loads(request.messages[-1].text))
        closed.set()
        return Turn(content="exhaustive answer", model="m1")

    fx.harness.worker = worker
    fx.harness.parent = scripted(fan_out([f"probe {i}" for i in range(30)]), closing)
    _, reply = await telegram(fx, "1", "/ultra map every option")
    assert "ultra mode" in reply.text
    with anyio.fail_after(60):
        await closed.wait()
    parent = next(r for r in fx.harness.requests if WORKER not in r.messages[0].text)
    assert "## Exhaustive mode (ultra)" in parent.messages[0].text
    assert seen["tasks"] == 30 and seen["succeeded"] == 30
    assert state["peak"] == 12


async def test_stop_during_a_fan_out_cancels_the_workers(fx) -> None:
    entered, left = [], []
    all_in = anyio.Event()

    async def worker(request):
        entered.append(1)
        if len(entered) == 4:
            all_in.set()
        try:
            await anyio.Event().wait()
        finally:
            left.append(1)

    fx.harness.worker = worker
    fx.harness.parent = scripted(fan_out([f"t{i}" for i in range(8)]))
    outcome, _reply = await telegram(fx, "1", "research", wait=False)
    with anyio.fail_after(30):
        await all_in.wait()
    await telegram(fx, "1", "/stop")
    with anyio.fail_after(30):
        await outcome.job.done.wait()
    assert outcome.job.stopped
    assert len(entered) == len(left) == 4  # every running worker was cancelled; 4 never ran


async def test_subagent_routing_one_shot_model_and_mis_pairing(fermix_home) -> None:
    harness = Harness()
    async with Fermix.open(
        fermix_home,
        config=config(subagent_model="m-small"),
        plugins=[("providers.harness", harness)],
    ) as fx:
        fx.harness = harness
        seen = {}
        harness.parent = scripted(
            fan_out(["a"]),
            lambda r: (seen.update(json.loads(r.messages[-1].text)), Turn(content="ok"))[1],
        )
        await telegram(fx, "1", "go")
        workers = [r for r in harness.requests if WORKER in r.messages[0].text]
        assert [w.model for w in workers] == ["m-small"]  # [fermix_core.routing] subagent_model
        harness.parent = scripted(fan_out(["b"], model="m1"), lambda r: Turn(content="ok"))
        await telegram(fx, "1", "again")
        workers = [r for r in harness.requests if WORKER in r.messages[0].text]
        assert workers[-1].model == "m1"  # the one-shot model for this call only


async def test_a_mis_paired_subagent_route_fails_loud_at_spawn(fermix_home) -> None:
    harness = Harness()
    routing = {"subagent_provider": "harness", "subagent_model": "far-model"}
    async with Fermix.open(
        fermix_home, config=config(**routing), plugins=[("providers.harness", harness)]
    ) as fx:
        fx.harness = harness
        seen = []
        harness.parent = scripted(
            fan_out(["a"]),
            lambda r: (seen.append(r.messages[-1]), Turn(content="told the user"))[1],
        )
        await telegram(fx, "1", "go")
        (result,) = seen
        assert result.tool_result.is_error
        assert 'model "far-model" is a elsewhere model in the catalog' in result.text
        assert not [r for r in harness.requests if WORKER in r.messages[0].text]


class SkillPlugin:
    """A third-party plugin shipping one skill directory through ``fermix_skill_dirs``."""

    def __init__(self, root) -> None:
        self.root = root

    @hookimpl
    def fermix_skill_dirs(self):
        yield SkillDirSpec(name="helpers", path=str(self.root))


async def test_a_plugin_skill_runs_at_guest_trust_for_the_owner(fermix_home, tmp_path) -> None:
    root = tmp_path / "plugin-skills"
    (root / "web-helper").mkdir(parents=True)
    (root / "web-helper" / "SKILL.md").write_text(
        "---\nname: web-helper\ndescription: Use for web lookups.\n---\nFetch and summarise.\n"
    )
    harness = Harness()
    async with Fermix.open(
        fermix_home,
        config=config(),
        plugins=[("providers.harness", harness), ("skills.helpers", SkillPlugin(root))],
    ) as fx:
        skill = fx.service.skills.require("web-helper")
        assert str(skill.trust) == "guest" and skill.source.startswith("plugin helpers")
        call = ToolCall(
            id="c1", name="skill_run", arguments={"name": "web-helper", "task": "look up x"}
        )
        harness.parent = scripted(
            Turn(content="", tool_calls=[call], model="m1"), lambda r: Turn(content="ok")
        )
        await telegram(fx, "1", "use the helper")
        (worker,) = [r for r in harness.requests if WORKER in r.messages[0].text]
        tools = {t.name for t in worker.tools}
        assert "Fetch and summarise." in worker.messages[0].text
        # The owner asked, but the plugin's skill only ever gets the guest surface.
        owner_tools = {t.name for t in harness.requests[0].tools}
        assert {"file_write", "shell", "web_fetch", "subagents"} <= owner_tools
        assert "tool_help" in tools and tools <= owner_tools
        assert not tools & {"file_write", "shell", "web_fetch", "memory_store", "subagents"}
