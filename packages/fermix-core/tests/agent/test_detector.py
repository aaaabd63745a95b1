from __future__ import annotations

import pytest
from fermix_core.agent.detector import RepeatedCallDetector, canonical_arguments


def test_canonical_arguments_ignore_key_order_and_whitespace():
    a = canonical_arguments({"b": [1, 2], "a": {"y": 1, "x": "é"}})
    b = canonical_arguments({"a": {"x": "é", "y": 1}, "b": [1, 2]})
    assert a == b == '{"a":{"x":"é","y":1},"b":[1,2]}'
    assert canonical_arguments({"a": 1}) != canonical_arguments({"a": "1"})


def test_unserializable_values_still_compare():
    assert canonical_arguments({"v": {1, 2}}) == canonical_arguments({"v": {1, 2}})


def test_warn_then_abort_on_an_unbroken_run():
    detector = RepeatedCallDetector()
    actions = [detector.observe("read", {"path": "a"}).action for _ in range(6)]
    assert actions == ["ok", "ok", "warn", "warn", "abort", "abort"]


def test_a_different_name_or_argument_resets_the_run():
    detector = RepeatedCallDetector()
    for _ in range(4):
        detector.observe("read", {"path": "a"})
    assert detector.observe("read", {"path": "b"}).count == 1
    assert detector.observe("read", {"path": "a"}).count == 1
    assert detector.observe("list", {"path": "a"}).count == 1
    detector.reset()
    assert detector.observe("list", {"path": "a"}).count == 1


def test_thresholds_must_make_sense():
    with pytest.raises(ValueError, match="warn_at < abort_at"):
        RepeatedCallDetector(warn_at=5, abort_at=5)
    with pytest.raises(ValueError, match="1 < warn_at"):
        RepeatedCallDetector(warn_at=1, abort_at=3)
    custom = RepeatedCallDetector(warn_at=2, abort_at=3)
    assert [custom.observe("x", {}).action for _ in range(3)] == ["ok", "warn", "abort"]


def test_canonical_arguments_are_what_json_dumps_spells():
    import json

    cases = [
        {},
        {"b": [1, 2.5, None, True], "a": {"y": float("nan"), "x": 'é\n"q"'}},
        {"v": {3, 1}, "when": object, 2: "int key", "t": (1, "x")},
        {"deep": {"z": {"y": {"x": [{"w": b"bytes"}]}}}},
    ]
    for case in cases:
        try:
            expected = json.dumps(
                case, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
            )
        except TypeError:  # mixed key types cannot be sorted: both raise alike
            with pytest.raises(TypeError):
                canonical_arguments(case)
            continue
        assert canonical_arguments(case) == expected
