"""The services table tools reach: services built on first use, copies that build nothing.

A one-off ask that calls no tool must not build the sandbox policy (its modules, the
approval record, the bubblewrap probe) nor the sub-agent delegator (routes, an HTTP
client); the daemon builds the policy at start, where a bad setting should show.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fermix_core.api import Fermix
from fermix_core.hookspecs import hookimpl
from fermix_core.messages import ToolCall, Turn
from fermix_core.runtime import Runtime
from fermix_core.service import FermixService
from fermix_core.specs import ModelInfo, PolicyClass, ProviderSpec, ToolSpec
from fermix_core.testing import FunctionProvider
from fermix_core.tool import NoArgs, ServiceTable, Tool, ToolOutput, services_with

pytestmark = pytest.mark.anyio


# --------------------------------------------------------------------------- the table


def counting(value: object, calls: list[str], name: str):
    def factory() -> object:
        calls.append(name)
        return value

    return factory


def test_a_provided_service_is_built_once_on_first_lookup() -> None:
    calls: list[str] = []
    table = ServiceTable({"memory": "backend"})
    table.provide("sandbox", counting("policy", calls, "sandbox"))

    assert "sandbox" in table and sorted(table) == ["memory", "sandbox"] and len(table) == 2
    assert not table.built("sandbox") and calls == []
    assert table["sandbox"] == "policy"
    assert table.get("sandbox") == "policy"
    assert calls == ["sandbox"] and table.built("sandbox")
    assert table.get("missing") is None
    with pytest.raises(KeyError):
        table["missing"]


def test_copies_share_unbuilt_services_and_build_nothing() -> None:
    calls: list[str] = []
    table = ServiceTable({"memory": "backend", "reply": "port"})
    table.provide("sandbox", counting("policy", calls, "sandbox"))
    table.provide("delegation", counting("delegator", calls, "delegation"))

    turn = services_with(table, reply="turn port", config="cfg")
    worker = services_with(turn, drop=("reply",))
    assert calls == []  # `{**table}` would have built both
    assert turn["reply"] == "turn port" and table["reply"] == "port"
    assert "reply" not in worker and worker["config"] == "cfg"

    assert worker["sandbox"] == "policy"
    assert table["sandbox"] == "policy" and turn["sandbox"] == "policy"
    assert calls == ["sandbox"]  # one build, seen by every copy
    assert not table.built("delegation")


def test_assigning_replaces_a_service_in_that_table_only() -> None:
    calls: list[str] = []
    table = ServiceTable()
    table.provide("sandbox", counting("first", calls, "sandbox"))
    earlier = table.with_values()
    table["sandbox"] = "widened"  # a grant swaps the runner's policy
    assert table["sandbox"] == "widened" and calls == []
    assert earlier["sandbox"] == "first"  # a turn already running keeps its own, as a dict copy
    del table["sandbox"]
    assert "sandbox" not in table
    with pytest.raises(KeyError):
        del table["sandbox"]


def test_a_failing_factory_fails_the_lookup_and_is_tried_again() -> None:
    attempts: list[int] = []

    def broken() -> object:
        attempts.append(1)
        raise ValueError("cannot build")

    table = ServiceTable()
    table.provide("sandbox", broken)
    for _ in range(2):
        with pytest.raises(ValueError, match="cannot build"):
            table["sandbox"]
    assert len(attempts) == 2 and not table.built("sandbox")


def test_threads_asking_at_once_get_one_build() -> None:
    import threading

    calls: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def slow() -> object:
        calls.append("build")
        entered.set()
        release.wait()
        return object()

    table = ServiceTable()
    table.provide("sandbox", slow)
    seen: list[object] = []
    first = threading.Thread(target=lambda: seen.append(table["sandbox"]))
    first.start()
    entered.wait()
    second = threading.Thread(target=lambda: seen.append(table["sandbox"]))
    second.start()
    release.set()
    first.join()
    second.join()
    assert calls == ["build"] and len(seen) == 2 and seen[0] is seen[1]


def test_a_plain_mapping_is_copied_as_a_dict() -> None:
    assert services_with({"a": 1, "reply": 2}, drop=("reply",), b=3) == {"a": 1, "b": 3}


# --------------------------------------------------------------------------- in the service


class Workspace(Tool[NoArgs]):
    async def run(self, args, ctx):
        return ToolOutput(content=str(ctx.service("sandbox").workspace))


class Harness:
    """One in-process model that calls the ``workspace`` tool when asked to."""

    def __init__(self) -> None:
        self.provider = FunctionProvider(self._answer, name="harness")

    async def _answer(self, request):
        last = request.messages[-1]
        if last.role == "tool":
            return Turn(content=f"workspace is {last.text}", model="m1")
        if "tool" in (last.text or ""):
            return Turn(tool_calls=[ToolCall(id="c1", name="workspace", arguments={})], model="m1")
        return Turn(content="ok", model="m1")

    @hookimpl
    def fermix_providers(self):
        yield ProviderSpec(
            name="harness",
            factory=lambda spec, settings: self.provider,
            keyless=True,
            default_model="m1",
            models=(ModelInfo(id="m1", context_window=8000),),
        )

    @hookimpl
    def fermix_tools(self):
        yield ToolSpec(
            name="workspace",
            description="Where files go.",
            factory=Workspace,
            policy=PolicyClass.READ_ONLY,
        )


CONFIG = {
    "fermix_core": {
        "providers": {"harness": {"primary": True}},
        "memory": {"review_enabled": False},
    }
}


async def test_a_turn_without_tools_builds_neither_sandbox_nor_delegator(fermix_home) -> None:
    async with Fermix.open(
        fermix_home, config=CONFIG, environ={}, plugins=[("providers.harness", Harness())]
    ) as fx:
        outcome = await fx.ask("hello")
        assert outcome.text == "ok"
        services = fx.service.runner.services
        assert "sandbox" in services and "delegation" in services
        assert not services.built("sandbox") and not services.built("delegation")
        assert not services.built("confirmations") and fx.service.runner.confirmations is None
        assert not (fermix_home.path / "workspace").exists()

        outcome = await fx.ask("use the tool")
        workspace = fermix_home.path / "workspace"
        assert outcome.text == f"workspace is {workspace}"
        assert services.built("sandbox") and workspace.is_dir()
        assert not services.built("delegation")

        store = services["confirmations"]  # what a grant proposal or /confirm reaches
        assert fx.service.runner.confirmations is store
        assert fx.service.runner.resume_after_grant in store.listeners


async def test_the_daemon_builds_the_sandbox_policy_at_start(fermix_home) -> None:
    runtime = Runtime.boot(
        fermix_home, config=CONFIG, environ={}, plugins=[("providers.harness", Harness())]
    )
    async with FermixService.running(runtime, scheduler=True) as service:
        assert service.runner.services.built("sandbox")
        assert Path(service.runner.services["sandbox"].workspace).is_dir()
