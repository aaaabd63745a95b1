"""``subagents``: caps under load, structured answers, surfaces, recursion, traces and /stop."""

from __future__ import annotations

import anyio
import pytest
from fermix_core.agent.delegation import MAX_DEPTH, worker_surface
from fermix_core.provider import ErrorKind, ProviderError
from fermix_core.routing.records import RouteConfigError
from fermix_core.testing.providers import reply, tool_call
from fermix_core.tool import Trust

from .conftest import Rig, final, last_tool_result

pytestmark = pytest.mark.anyio


def fan_out(tasks: list[str], **extra: object) -> object:
    return tool_call("subagents", {"tasks": tasks, **extra})


async def test_structured_answer_names_a_worker_that_fails_mid_way(rig: Rig) -> None:
    def worker(task: str, request):
        if task == "b" and request.messages[-1].role != "tool":
            return tool_call("note", {"text": "halfway"})
        if task == "b":
            raise ProviderError(ErrorKind.SERVER_ERROR, "upstream fell over", provider="fake")
        return reply(f"answer {task}")

    rig.worker = worker
    seen: dict = {}

    def closing(request):
        seen.update(last_tool_result(request))
        return reply("summary")

    rig.parent = [fan_out(["a", "b", "c"]), closing]
    result = await rig.turn("research three things")
    assert result.text == "summary"
    assert seen["tasks"] == 3 and seen["succeeded"] == 2 and seen["failed"] == [2]
    by_task = {r["task"]: r for r in seen["results"]}
    assert by_task[1]["result"] == "answer a" and by_task[3]["status"] == "ok"
    assert by_task[2]["status"] == "failed"
    assert "upstream fell over" in by_task[2]["error"]
    assert (
        by_task[2]["tool_calls"] == []
        and ("note", by_task[2]["session_id"], "halfway") in rig.calls
    )
    # Traces: random hex ids, linked both ways to the parent session.
    events = rig.events()
    spawned = {e["child_session_id"] for e in events if e.get("event") == "subagent_spawn"}
    assert all(e["session_id"] == "main-1" for e in events if e.get("event") == "subagent_spawn")
    started = {e["session_id"]: e for e in events if e.get("event") == "subagent_start"}
    assert spawned == set(started) and len(spawned) == 3
    assert all(len(s) == 16 and int(s, 16) >= 0 for s in spawned)
    assert all(e["parent_session_id"] == "main-1" for e in started.values())


class Gate:
    """Counts workers inside the model call; opens once *cap* are in (or all have started)."""

    def __init__(self, cap: int, total: int) -> None:
        self.cap, self.total = cap, total
        self.active = self.peak = self.started = 0
        self.open = anyio.Event()

    async def __call__(self, task: str, request):
        self.started += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        if self.active >= self.cap or self.started == self.total:
            self.open.set()
        await self.open.wait()
        self.active -= 1
        return reply(f"ok {task}")


async def run_fan_out(rig: Rig, tasks: int, cap: int, **state) -> dict:
    gate = Gate(cap, tasks)
    rig.worker = gate
    seen: dict = {}
    rig.parent = [
        fan_out([f"t{i}" for i in range(tasks)], **state.pop("args", {})),
        lambda request: (seen.update(last_tool_result(request)), reply("ok"))[1],
    ]
    await rig.turn("go", **state)
    seen["peak"] = gate.peak
    return seen


async def test_thirty_tasks_are_refused_outside_ultra_not_truncated(rig: Rig) -> None:
    seen: dict = {}
    rig.parent = [
        fan_out([f"t{i}" for i in range(30)]),
        lambda request: (seen.update(last_tool_result(request)), reply("ok"))[1],
    ]
    await rig.turn("go")
    assert "30 tasks is over the cap of 10" in seen["text"]
    assert not any("You are a sub-agent" in r.messages[0].text for r in rig.requests)


@pytest.mark.parametrize(("args", "cap"), [({}, 4), ({"concurrency": 8}, 8)])
async def test_ten_tasks_run_at_most_the_concurrency_cap(rig: Rig, args: dict, cap: int) -> None:
    seen = await run_fan_out(rig, 10, cap, args=args)
    assert seen["succeeded"] == 10 and seen["peak"] == cap


async def test_concurrency_over_eight_is_refused(rig: Rig) -> None:
    seen = await run_fan_out(rig, 2, 2, args={"concurrency": 9})
    assert "concurrency 9 is over the cap of 8" in seen["text"]


async def test_ultra_runs_thirty_probes_twelve_at_a_time_with_reduced_depth(rig: Rig) -> None:
    seen = await run_fan_out(rig, 30, 12, run_profile="ultra")
    assert seen["succeeded"] == 30 and seen["peak"] == 12
    over = await run_fan_out(rig, 51, 12, run_profile="ultra")
    assert "51 tasks is over the cap of 50" in over["text"]
    from fermix_core.agent.delegation import limits_for

    assert limits_for("ultra").iterations < limits_for("normal").iterations == 100


async def test_workers_get_the_baseline_intersected_with_the_callers_ceiling(rig: Rig) -> None:
    tools_seen: list[set[str]] = []

    def worker(task, request):
        tools_seen.append({t.name for t in request.tools})
        return reply("ok")

    rig.worker = worker
    rig.parent = [fan_out(["x"]), final()]
    await rig.turn("go")
    assert tools_seen[0] >= {"note", "owner_read", "subagents", "skill_run"}
    assert not tools_seen[0] & {"computer_use", "react"}
    # A confined caller (a job or skill narrowed by allowed_tools) spawns confined workers.
    narrow = worker_surface(rig.capabilities, {"note", "subagents"}, Trust.OPERATOR, 1)
    assert set(narrow.specs) == {"note", "subagents"}
    # Guests never have subagents in their surface at all, nor owner-only tools in workers.
    assert "subagents" not in rig.capabilities.snapshot(Trust.GUEST).specs
    guest = worker_surface(rig.capabilities, rig.capabilities.specs, Trust.GUEST, 1)
    assert not set(guest.specs) & {"subagents", "skill_run", "owner_read", "computer_use"}


async def test_recursion_stops_at_the_depth_cap(rig: Rig) -> None:
    depths: list[set[str]] = []

    def worker(task, request):
        names = {t.name for t in request.tools}
        if request.messages[-1].role == "tool":
            return reply("nested done")
        depths.append(names)
        if "subagents" in names:
            return tool_call("subagents", {"tasks": ["deeper"]})
        return reply("bottom")

    rig.worker = worker
    rig.parent = [fan_out(["deeper"]), final()]
    await rig.turn("go")
    # main (0) → workers at depth 1, 2, 3 may delegate; the depth-4 worker cannot.
    assert len(depths) == MAX_DEPTH
    assert ["subagents" in d for d in depths] == [True, True, True, False]
    # And a context already at the cap is refused outright.
    seen: dict = {}
    rig.parent = [
        fan_out(["x"]),
        lambda r: (seen.update(last_tool_result(r)), reply("ok"))[1],
    ]
    await rig.turn("go", delegation_depth=MAX_DEPTH)
    assert "nested 4 deep" in seen["text"]


async def test_guest_caller_is_refused_even_if_dispatched_by_name(rig: Rig) -> None:
    tool = rig.capabilities.tool("subagents")
    out = await tool.invoke({"tasks": ["x"]}, rig.context(Trust.GUEST))
    assert out.is_error and "not available" in out.text


async def test_one_shot_model_and_a_mis_paired_route_fail_loud(rig: Rig) -> None:
    rig.parent = [fan_out(["x"], model="small-model"), final()]
    await rig.turn("go")
    assert rig.models == ["small-model"]

    async def mispaired(model):
        raise RouteConfigError(
            '[fermix_core.routing] subagent_*: model "llama3" is a ollama model in the '
            'catalog, not a openrouter one; set the provider to "ollama"'
        )

    ctx = rig.context()
    ctx.services["delegation"] = rig.delegator(callers=mispaired)
    ctx.capabilities = rig.capabilities.snapshot(Trust.OPERATOR).specs
    out = await rig.capabilities.tool("subagents").invoke({"tasks": ["x"]}, ctx)
    assert out.is_error
    assert "sub-agent route cannot run" in out.text and "ollama model" in out.text


async def test_stop_during_a_fan_out_cancels_every_worker(rig: Rig) -> None:
    entered, left = [], []
    all_in = anyio.Event()

    async def worker(task, request):
        entered.append(task)
        if len(entered) == 4:
            all_in.set()
        try:
            await anyio.Event().wait()  # never answers: only cancellation ends it
        finally:
            left.append(task)

    rig.worker = worker
    rig.parent = [fan_out([f"t{i}" for i in range(6)]), final()]
    finished = []
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def turn() -> None:
            with scope:
                finished.append(await rig.turn("go"))

        tg.start_soon(turn)
        await all_in.wait()
        scope.cancel()  # what /stop does to the turn's scope
    assert finished == []
    assert sorted(entered) == sorted(left) and len(entered) == 4  # 4 ran, 2 never started
