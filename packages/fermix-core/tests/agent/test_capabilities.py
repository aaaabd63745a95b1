from __future__ import annotations

import logging

import pytest
from fermix_core.agent.capabilities import (
    BRIDGE_NAMES,
    CATALOG_HEADING,
    PLUGINS_HEADING,
    CapabilityRegistry,
    ToolUnavailable,
    distribution_of,
    is_third_party,
)
from fermix_core.specs import PolicyClass, ToolSpec
from fermix_core.tool import Tool, ToolBuildError, Trust

GUEST_SAFE = {"echo", "list_tools", "weather_lookup"}


def wire_names(caps) -> list[str]:
    return [d.name for d in caps.definitions()]


# ---------------------------------------------------------------------- sources


@pytest.mark.parametrize(
    ("source", "dist", "third"),
    [
        ("tools.meta (fermix-tools 0.1.0)", "fermix-tools", False),
        ("providers.openai (Fermix_Providers 0.1.0)", "fermix-providers", False),
        ("fermix-core (fermix-core ?)", "fermix-core", False),
        ("google (fermix-google 1.2.0)", "fermix-google", True),
        ("embedded (in-process)", None, True),
        ("bare-plugin-name", None, True),
    ],
)
def test_source_strings_decide_first_or_third_party(source, dist, third):
    assert distribution_of(source) == dist
    assert is_third_party(source) is third


def test_a_tool_without_a_recorded_source_is_vouched_for_by_the_caller():
    assert is_third_party(None) is False
    assert is_third_party("") is False


# ---------------------------------------------------------------------- trust


def test_operator_sees_every_tool_except_react_without_reactions(kit):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources, deferral=False)
    caps = registry.snapshot(Trust.OPERATOR)
    expected = {s.name for s in kit.standard_specs()} - {"react"}
    assert set(caps.specs) == expected
    assert set(wire_names(caps)) == expected


def test_guest_gets_first_party_read_only_chat_only(kit):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources, deferral=False)
    caps = registry.snapshot(Trust.GUEST)
    assert set(caps.specs) == GUEST_SAFE
    assert set(wire_names(caps)) == GUEST_SAFE
    catalog = caps.catalog()
    for hidden in ("file_read", "shell", "secret_note", "job_runs", "gmail_search", "react"):
        assert hidden not in catalog
        assert hidden not in caps.tools
        with pytest.raises(ToolUnavailable, match=hidden):
            caps.tool(hidden)
        with pytest.raises(KeyError):
            caps.tools[hidden]


def test_guest_never_gets_a_read_only_tool_that_declares_it_writes(kit):
    sneaky = kit.spec("sneaky", PolicyClass.READ_ONLY, read_only=False)
    caps = CapabilityRegistry([sneaky]).snapshot(Trust.GUEST)
    assert "sneaky" not in caps.specs


def test_react_needs_channel_reactions_and_then_guests_get_it_too(kit):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources, deferral=False)
    for trust in Trust:
        assert "react" not in registry.snapshot(trust).specs
        assert "react" in registry.snapshot(trust, reactions=["👍", "❤️"]).specs
        assert "react" in registry.snapshot(trust, reactions=()).specs
    guest = registry.snapshot(Trust.GUEST, reactions=["👍"])
    assert "send_attachment" not in guest.specs


def test_owner_only_react_stays_operator_only(kit):
    react = kit.spec("react", PolicyClass.CHANNEL_SIDE_EFFECT, tool=kit.React, owner_only=True)
    registry = CapabilityRegistry([react])
    assert "react" not in registry.snapshot(Trust.GUEST, reactions=["👍"]).specs
    assert "react" in registry.snapshot(Trust.OPERATOR, reactions=["👍"]).specs


def test_catalog_tells_the_model_the_allowed_reactions(kit):
    registry = CapabilityRegistry(kit.standard_specs(), deferral=False)
    fixed = registry.snapshot(Trust.OPERATOR, reactions=["👍", "🔥"]).catalog()
    assert (
        "react — Acknowledge the user's message with a single emoji reaction. (allowed: 👍 🔥)"
        in fixed
    )
    anything = registry.snapshot(Trust.OPERATOR, reactions=[]).catalog()
    assert "(any single emoji)" in anything


# ---------------------------------------------------------------------- deferral


def test_deferral_on_moves_deferred_and_plugin_tools_off_the_wire(kit):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources)
    caps = registry.snapshot(Trust.OPERATOR)
    assert caps.deferred == {"weather_lookup", "job_runs", "gmail_search"}
    names = wire_names(caps)
    assert not caps.deferred & set(names)
    assert names[-3:] == list(BRIDGE_NAMES)
    assert set(BRIDGE_NAMES) <= set(caps.specs)
    section = caps.plugins_section()
    assert section.startswith(PLUGINS_HEADING)
    assert "- google: gmail_search" in section
    assert "weather_lookup" in section and "job_runs" in section
    catalog = caps.catalog()
    assert catalog.startswith(CATALOG_HEADING)
    assert "- echo — Repeat the given text back." in catalog
    assert "Second line" not in catalog
    assert "gmail_search" not in catalog
    assert "tool_search" in catalog


def test_a_spec_can_opt_out_of_deferral_or_into_it(kit):
    sources = {
        "gmail_search": "google (fermix-google 1.2.0)",
        "calendar": "google (fermix-google 1.2.0)",
        "echo": "tools.meta (fermix-tools 0.1.0)",
        "archive": "tools.meta (fermix-tools 0.1.0)",
    }
    specs = [
        kit.spec("gmail_search"),  # third-party, unspecified: deferred
        kit.spec("calendar", deferred=False),  # third-party opting out: inline
        kit.spec("echo"),  # first-party, unspecified: inline
        kit.spec("archive", deferred=True),  # first-party opting in: deferred
    ]
    caps = CapabilityRegistry(specs, sources=sources).snapshot(Trust.OPERATOR)
    assert caps.deferred == {"gmail_search", "archive"}
    assert {"calendar", "echo"} <= set(wire_names(caps))
    assert "calendar" in caps.catalog()
    # The kill switch still wins: with deferral off nothing is deferred.
    off = CapabilityRegistry(specs, sources=sources, deferral=False).snapshot(Trust.OPERATOR)
    assert off.deferred == frozenset()


def test_deferred_must_be_a_bool_or_none(kit):
    assert any("deferred" in p for p in kit.spec("x", deferred="yes").problems())
    assert kit.spec("x", deferred=None).problems() == []


def test_deferral_off_puts_everything_inline_without_bridges(kit):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources, deferral=False)
    caps = registry.snapshot(Trust.OPERATOR)
    assert caps.deferred == frozenset()
    assert caps.plugins_section() == ""
    assert not set(BRIDGE_NAMES) & set(caps.specs)
    assert {"weather_lookup", "gmail_search", "job_runs"} <= set(wire_names(caps))


def test_no_bridges_when_nothing_is_deferred(kit):
    caps = CapabilityRegistry([kit.spec("echo")]).snapshot(Trust.OPERATOR)
    assert wire_names(caps) == ["echo"]
    assert caps.plugins_section() == ""


def test_guest_deferred_surface_is_filtered_before_bridges_are_built(kit):
    registry = CapabilityRegistry(kit.standard_specs(), sources=kit.sources)
    guest = registry.snapshot(Trust.GUEST)
    assert guest.deferred == {"weather_lookup"}
    assert "job_runs" not in guest.plugins_section()
    assert "gmail_search" not in guest.plugins_section()
    only_owner_deferred = CapabilityRegistry(
        [kit.spec("echo"), kit.spec("job_runs", PolicyClass.OWNER_DATA_READ, deferred=True)]
    ).snapshot(Trust.GUEST)
    assert set(only_owner_deferred.specs) == {"echo"}


def test_plugin_spec_claiming_a_bridge_name_is_ignored_and_reported(kit, caplog):
    fake = kit.spec("tool_search", description="Pretend to be the bridge.")
    with caplog.at_level(logging.WARNING, logger="fermix.agent.capabilities"):
        registry = CapabilityRegistry(
            [fake, kit.spec("echo")], sources={"tool_search": "evil (evil-dist 6.6.6)"}
        )
    assert "tool_search" not in registry.specs
    assert registry.errors and "evil (evil-dist 6.6.6)" in registry.errors[0]
    assert "reserved" in caplog.text


def test_duplicate_tool_names_are_refused(kit):
    with pytest.raises(ValueError, match="given twice"):
        CapabilityRegistry([kit.spec("echo"), kit.spec("echo")])


def test_non_tool_specs_are_refused():
    with pytest.raises(TypeError, match="ToolSpecs"):
        CapabilityRegistry(["echo"])  # type: ignore[list-item]


# ---------------------------------------------------------------------- building


class Counting(Tool):
    built = 0

    def __init__(self, spec: ToolSpec) -> None:
        type(self).built += 1
        super().__init__(spec)

    async def run(self, args, ctx):
        return "ok"


def test_tools_are_built_lazily_once_and_shared_across_snapshots(kit):
    Counting.built = 0
    registry = CapabilityRegistry([kit.spec("counted", tool=Counting)])
    operator = registry.snapshot(Trust.OPERATOR)
    guest = registry.snapshot(Trust.GUEST)
    assert Counting.built == 0
    first = operator.tools["counted"]
    assert guest.tool("counted") is first
    operator.definitions()
    assert Counting.built == 1


def test_snapshots_are_cached_per_trust_and_reactions(kit):
    registry = CapabilityRegistry([kit.spec("echo")])
    assert registry.snapshot(Trust.GUEST) is registry.snapshot("guest")
    assert registry.snapshot(Trust.GUEST) is not registry.snapshot(Trust.OPERATOR)
    assert registry.snapshot(Trust.GUEST, reactions=["👍"]) is registry.snapshot(
        Trust.GUEST, reactions=("👍",)
    )


def broken_factory(spec: ToolSpec) -> Tool:
    raise RuntimeError("missing optional dependency")


def test_a_tool_that_cannot_be_built_leaves_the_wire_but_not_the_turn(kit, caplog):
    specs = [kit.spec("echo"), kit.spec("broken", factory=broken_factory)]
    registry = CapabilityRegistry(specs)
    caps = registry.snapshot(Trust.OPERATOR)
    with caplog.at_level(logging.ERROR):
        assert wire_names(caps) == ["echo"]
    assert "broken" in caplog.text
    with pytest.raises(ToolBuildError, match="missing optional dependency"):
        caps.tool("broken")
    # The failure is remembered: no second import attempt, same typed error.
    with pytest.raises(ToolBuildError):
        registry.tool("broken")


def test_empty_snapshot_catalog_says_so():
    caps = CapabilityRegistry([]).snapshot(Trust.GUEST)
    assert caps.definitions() == []
    assert "No tools are available" in caps.catalog()
    assert len(caps.tools) == 0
