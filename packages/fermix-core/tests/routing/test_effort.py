"""Effort rules from spec data alone: subsets, model ceilings, floor, clamping, notes."""

from __future__ import annotations

import pytest
from fermix_core.routing.effort import (
    EffortError,
    accepted_efforts,
    clamp_effort,
    find_model,
    resolve_effort,
)
from fermix_core.specs import REASONING_EFFORTS, ModelInfo, ProviderSpec

FULL = ProviderSpec(
    name="full",
    factory="x.y:Z",
    config_keys=frozenset({"reasoning_effort"}),
    reasoning_efforts=REASONING_EFFORTS,
    models=(
        ModelInfo("new", 1000, max_effort="max"),
        ModelInfo("old", 1000, max_effort="xhigh"),
        ModelInfo("tiny", 1000, max_effort="low"),
        ModelInfo("open", 1000),
    ),
)
NO_NONE = ProviderSpec(
    name="nonone",
    factory="x.y:Z",
    config_keys=frozenset({"reasoning_effort"}),
    reasoning_efforts=("low", "medium", "high", "xhigh", "max"),
    models=(ModelInfo("m", 1000),),
)
LOW_CEILING = ProviderSpec(
    name="capped",
    factory="x.y:Z",
    config_keys=frozenset({"reasoning_effort"}),
    reasoning_efforts=("none", "low", "medium", "high"),
)
NONE_AT_ALL = ProviderSpec(name="plain", factory="x.y:Z", models=(ModelInfo("p", 1000),))


def test_find_model_is_exact() -> None:
    assert find_model(FULL, "new") is FULL.models[0]
    assert find_model(FULL, "NEW") is None
    assert find_model(FULL, "new ") is None
    assert find_model(NONE_AT_ALL, "new") is None


def test_accepted_efforts_narrow_to_the_model_ceiling() -> None:
    assert accepted_efforts(FULL) == REASONING_EFFORTS
    assert accepted_efforts(FULL, "new") == REASONING_EFFORTS
    assert accepted_efforts(FULL, "old") == ("none", "low", "medium", "high", "xhigh")
    assert accepted_efforts(FULL, "tiny") == ("none", "low")
    assert accepted_efforts(FULL, "open") == REASONING_EFFORTS  # no ceiling in the catalog
    assert accepted_efforts(FULL, "unknown-model") == REASONING_EFFORTS
    assert accepted_efforts(NONE_AT_ALL, "p") == ()


@pytest.mark.parametrize(
    ("spec", "model", "effort", "expected"),
    [
        (FULL, "old", "max", "xhigh"),  # model ceiling
        (FULL, "new", "max", "max"),
        (FULL, "tiny", "high", "low"),
        (FULL, "old", "low", "low"),
        (FULL, "unknown-model", "max", "max"),  # no catalog entry: untouched
        (FULL, None, "max", "max"),
        (LOW_CEILING, None, "max", "high"),  # provider ceiling
        (LOW_CEILING, "anything", "xhigh", "high"),
        (NO_NONE, "m", "none", "low"),  # floor
        (NO_NONE, "m", "max", "max"),
        (NONE_AT_ALL, "p", "high", None),  # no efforts: nothing is sent
        (NONE_AT_ALL, None, "none", None),
    ],
)
def test_clamp(spec: ProviderSpec, model: str | None, effort: str, expected: str | None) -> None:
    assert clamp_effort(spec, model, effort) == expected


@pytest.mark.parametrize("bad", ["extreme", "HIGH", "", "minimal", " high"])
def test_unknown_words_are_errors_listing_the_vocabulary(bad: str) -> None:
    with pytest.raises(EffortError) as info:
        clamp_effort(FULL, "new", bad)
    for level in REASONING_EFFORTS:
        assert level in str(info.value)
    assert isinstance(info.value, ValueError)
    with pytest.raises(EffortError):
        clamp_effort(NONE_AT_ALL, "p", bad)  # even where nothing would be sent


def test_a_corrupt_model_ceiling_does_not_break_resolution() -> None:
    weird = ProviderSpec(
        name="weird",
        factory="x.y:Z",
        config_keys=frozenset({"reasoning_effort"}),
        reasoning_efforts=("low", "high"),
        models=(ModelInfo("w", 1, max_effort="ultra"),),
    )
    assert accepted_efforts(weird, "w") == ("low", "high")


def test_resolve_effort_explains_every_change() -> None:
    kept = resolve_effort(FULL, "new", "max")
    assert (kept.effort, kept.changed, kept.note) == ("max", False, None)

    lowered = resolve_effort(FULL, "old", "max")
    assert lowered.effort == "xhigh" and lowered.requested == "max"
    assert "above" in lowered.note and "old" in lowered.note and "'xhigh'" in lowered.note

    raised = resolve_effort(NO_NONE, "m", "none")
    assert raised.effort == "low" and "below" in raised.note

    dropped = resolve_effort(NONE_AT_ALL, "p", "high")
    assert dropped.effort is None and "takes no reasoning effort" in dropped.note

    nothing = resolve_effort(FULL, "new", None)
    assert (nothing.effort, nothing.note) == (None, None)


def test_the_effort_module_stays_cheap_to_import() -> None:
    import subprocess
    import sys

    code = (
        "import sys, fermix_core.routing.effort\n"
        "heavy = [m for m in ('pydantic', 'anyio', 'httpx', 'fermix_core.config', "
        "'fermix_core.provider') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
