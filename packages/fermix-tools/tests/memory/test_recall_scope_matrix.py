"""memory_recall for every caller × requested scope × source, on both backends.

The requested scope can only narrow: the expected sets below are what each *caller* may
see, and nothing outside them may appear — not in the ids, not in the text.
"""

from __future__ import annotations

import pytest
from fermix_core.tool import Trust, build_tool
from fermix_tools.memory.plugin import MEMORY_RECALL

from .conftest import CALLERS, FACTS, HISTORY

pytestmark = pytest.mark.anyio

ALL_FACTS = set(FACTS)
ALL_HISTORY = set(HISTORY)
OWNER_FACTS = {"owner_A", "owner_B", "system"}
OWNER_HISTORY = {"owner_A", "owner_B"}

#: (caller, scope) -> (visible facts, visible history)
EXPECTED: dict[tuple[str, str], tuple[set[str], set[str]]] = {}
for _scope in ("current", "owner", "all"):
    EXPECTED["guest_A", _scope] = ({"guest_A"}, {"guest_A"})
    EXPECTED["guest_G", _scope] = ({"guest_G"}, {"guest_G"})
    EXPECTED["job1", _scope] = ({"job1"}, {"job1"})
    EXPECTED["guest_job2", _scope] = ({"job2"}, set())
for _caller in ("operator_A", "subagent_A"):
    EXPECTED[_caller, "current"] = ({"owner_A", "guest_A"}, {"owner_A", "guest_A"})
    EXPECTED[_caller, "owner"] = (OWNER_FACTS, OWNER_HISTORY)
    EXPECTED[_caller, "all"] = (ALL_FACTS, ALL_HISTORY)
EXPECTED["operator_none", "current"] = (set(), set())
EXPECTED["operator_none", "owner"] = (OWNER_FACTS, OWNER_HISTORY)
EXPECTED["operator_none", "all"] = (ALL_FACTS, ALL_HISTORY)


def test_every_caller_and_scope_has_an_expectation() -> None:
    assert set(EXPECTED) == {(c, s) for c in CALLERS for s in ("current", "owner", "all")}


@pytest.mark.parametrize("source", ["memories", "history", "all"])
@pytest.mark.parametrize("scope", ["current", "owner", "all"])
@pytest.mark.parametrize("caller", list(CALLERS))
async def test_recall_sees_exactly_what_the_caller_may(world, caller, scope, source) -> None:
    facts, history = EXPECTED[caller, scope]
    if source == "history":
        facts = set()
    if source == "memories":
        history = set()
    out = await build_tool(MEMORY_RECALL).invoke(
        {"query": "zebra", "scope": scope, "source": source, "limit": 50}, world.context(caller)
    )
    assert not out.is_error, out.text
    assert world.fact_labels(out.data["facts"]) == facts
    assert world.message_labels(out.data["history"]) == history
    for label in ALL_FACTS - facts:
        assert f"zebra fact {label} " not in out.text + " "
    for label in ALL_HISTORY - history:
        assert f"said {label} " not in out.text + " " and f"reply {label} " not in out.text + " "
    assert out.data["scope"]["requested"] == scope
    narrowed = caller.startswith(("guest", "job"))
    if narrowed:
        assert out.data["scope"]["effective"] in ("current", "job")


@pytest.mark.parametrize("caller", list(CALLERS))
async def test_key_lookup_respects_the_scope(world, caller) -> None:
    await world.backend.store(
        "identity", "Owner lives in Porto", key="user.city", provenance=FACTS["owner_B"]
    )
    tool = build_tool(MEMORY_RECALL)
    found = await tool.invoke({"key": "user.city", "scope": "all"}, world.context(caller))
    missing = await tool.invoke({"key": "user.nothing", "scope": "all"}, world.context(caller))
    may_see = caller.startswith(("operator", "subagent"))
    assert ("Owner lives in Porto" in found.text) is may_see
    if not may_see:
        assert found.text.replace("user.city", "K") == missing.text.replace("user.nothing", "K"), (
            "a fact outside the scope reads exactly like one that does not exist"
        )


@pytest.mark.parametrize(
    ("trust_key_origin_state", "message"),
    [
        ((Trust.GUEST, None, "main", {}), "inside its conversation"),
        ((Trust.OPERATOR, ("job", "x", None), "job", {}), "no job id"),
        ((Trust.GUEST, ("job", "x", None), "job", {"job_id": "  "}), "no job id"),
    ],
)
async def test_callers_without_memory_get_a_readable_error(world, trust_key_origin_state, message):
    trust, key, origin, state = trust_key_origin_state
    ctx = world.context("operator_A")
    ctx.trust, ctx.conversation_key, ctx.origin, ctx.state = trust, key, origin, state
    out = await build_tool(MEMORY_RECALL).invoke({"query": "zebra"}, ctx)
    assert out.is_error and message in out.text
    assert "zebra fact" not in out.text
