"""memory_sources_list, and which memory tools each trust level is offered."""

from __future__ import annotations

import pytest
from fermix_core.agent import CapabilityRegistry
from fermix_core.memory.review import ReviewState, review_state_path
from fermix_core.plugins.host import PluginHost
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Trust, build_tool
from fermix_tools.memory import plugin
from fermix_tools.memory.plugin import MEMORY_SOURCES_LIST

pytestmark = pytest.mark.anyio

SOURCES = build_tool(MEMORY_SOURCES_LIST)


async def test_sources_list_reports_facts_history_profiles_and_review(world) -> None:
    home = world.home.path
    (home / "memory" / "main").mkdir(parents=True)
    (home / "memory" / "main" / "USER.md").write_text("# About the owner\n")
    ReviewState(
        last_run=1_700_000_000.0,
        last_success=1_699_000_000.0,
        failures=2,
        backoff_until=1_700_003_600.0,
        last_error="boom",
    ).save(review_state_path(home))
    await world.backend.forget(world.fact_ids["job2"])
    out = await SOURCES.invoke({}, world.context("operator_A"))
    assert not out.is_error, out.text
    lines = out.text.splitlines()
    assert lines[0].startswith("Saved facts (all scope, backend ")
    assert "6 active (6 context), 1 archived" in lines[0]
    assert lines[1] == (
        "Conversation history: 10 messages in 4 conversations (searchable with memory_recall "
        "source='history')."
    )
    assert lines[2].startswith("Profile memory/main/USER.md: 18 bytes, updated ")
    assert lines[3] == "Profile memory/main/MEMORY.md: missing."
    assert "the last 2 attempt(s) failed" in lines[4]
    assert out.data["review"]["last_error"] == "boom"
    assert "zebra" not in out.text, "counts and status, never the facts themselves"


async def test_a_job_sees_only_its_own_counts(world) -> None:
    out = await SOURCES.invoke({}, world.context("job1"))
    assert out.data["scope"] == "job"
    assert out.data["memories"]["active"] == 1
    assert "has not run yet" in out.text


@pytest.mark.parametrize("caller", ["guest_A", "guest_job2"])
async def test_guests_are_refused_even_if_dispatched(world, caller) -> None:
    out = await SOURCES.invoke({}, world.context(caller))
    assert out.is_error and "owner's information" in out.text


def test_policies_match_the_trust_design() -> None:
    specs = {spec.name: spec for spec in plugin.fermix_tools()}
    assert {n: s.policy for n, s in specs.items()} == {
        "memory_store": PolicyClass.WRITE,
        "memory_forget": PolicyClass.WRITE,
        "memory_recall": PolicyClass.READ_ONLY,
        "memory_sources_list": PolicyClass.OWNER_DATA_READ,
    }
    assert all(s.problems() == [] for s in specs.values())
    assert all(s.guidance and s.failure_modes for s in specs.values())
    assert specs["memory_recall"].read_only and not specs["memory_store"].read_only


def test_guests_are_offered_recall_only() -> None:
    specs = list(plugin.fermix_tools())
    source = "tools.memory (fermix-tools 0.1.0)"
    registry = CapabilityRegistry(specs, sources={s.name: source for s in specs})
    guest = registry.snapshot(Trust.GUEST, reactions=None)
    operator = registry.snapshot(Trust.OPERATOR, reactions=None)
    assert set(guest.specs) == {"memory_recall"}
    assert set(operator.specs) == {s.name for s in specs}


def test_the_plugin_registers_through_the_hook() -> None:
    host = PluginHost()
    host.register(plugin, "tools.memory")
    registry = host.collect()
    assert set(registry.typed(ToolSpec)) == {
        "memory_store",
        "memory_forget",
        "memory_recall",
        "memory_sources_list",
    }
    assert registry.errors == []
