from __future__ import annotations

from types import SimpleNamespace

from fermix_core.plugins.discovery import canonical_dist_name, discover, parse_load_filter


def ep(
    name: str, value: str, dist: str | None = "fermix-weather", version: str = "1.0"
) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        value=value,
        dist=SimpleNamespace(name=dist, version=version) if dist else None,
    )


def test_parse_load_filter_distinguishes_unset_empty_and_list() -> None:
    assert parse_load_filter(None) is None
    assert parse_load_filter("") == frozenset()
    assert parse_load_filter(" a, b ,,") == frozenset({"a", "b"})


def test_canonical_names_compare_equal() -> None:
    assert canonical_dist_name("Fermix_Weather.Plugin") == "fermix-weather-plugin"


def test_first_party_sorted_first_then_by_name() -> None:
    records = discover(
        entry_points=[
            ep("tools.zeta", "z"),
            ep("tools.alpha", "a"),
            ep("providers.openai", "o", dist="fermix-providers"),
        ]
    )
    assert [r.name for r in records] == ["providers.openai", "tools.alpha", "tools.zeta"]
    assert all(r.status == "pending" for r in records)


def test_only_filter_matches_entry_point_or_distribution_name() -> None:
    records = discover(
        entry_points=[
            ep("tools.weather", "w"),
            ep("tools.other", "o", dist="fermix-other"),
            ep("providers.acme", "a", dist="Fermix_Acme"),
        ],
        only=frozenset({"tools.weather", "fermix-acme"}),
    )
    status = {r.name: r.status for r in records}
    assert status == {
        "tools.weather": "pending",
        "providers.acme": "pending",
        "tools.other": "blocked",
    }
    blocked = next(r for r in records if r.name == "tools.other")
    assert "FERMIX_LOAD_PLUGINS" in (blocked.error or "")


def test_empty_filter_loads_nothing() -> None:
    records = discover(
        entry_points=[ep("tools.weather", "w"), ep("tools.x", "x")], only=frozenset()
    )
    assert {r.status for r in records} == {"blocked"}


def test_disabled_by_config() -> None:
    records = discover(
        entry_points=[ep("tools.weather", "w"), ep("tools.x", "x", dist="x")],
        disabled=["tools.weather"],
    )
    status = {r.name: r.status for r in records}
    assert status == {"tools.weather": "disabled", "tools.x": "pending"}


def test_same_name_from_two_distributions_is_a_conflict_naming_both() -> None:
    records = discover(
        entry_points=[
            ep("tools.weather", "a", dist="fermix-weather", version="1.0"),
            ep("tools.weather", "b", dist="fermix-weather-pro", version="2.3"),
            ep("tools.fine", "c", dist="fermix-fine"),
        ]
    )
    conflicts = [r for r in records if r.status == "conflict"]
    assert len(conflicts) == 2
    for record in conflicts:
        assert "fermix-weather 1.0" in record.error
        assert "fermix-weather-pro 2.3" in record.error
    assert next(r for r in records if r.name == "tools.fine").status == "pending"


def test_a_conflict_names_the_remedy_and_disabling_one_distribution_resolves_it() -> None:
    both = [
        ep("tools.weather", "a", dist="fermix-weather", version="1.0"),
        ep("tools.weather", "b", dist="fermix-weather-fork", version="0.3"),
    ]
    [first, _] = discover(entry_points=both)
    assert 'disabled = ["fermix-weather"]' in first.error

    records = discover(entry_points=both, disabled=["fermix-weather-fork"])
    status = {r.distribution: r.status for r in records}
    assert status == {"fermix-weather": "pending", "fermix-weather-fork": "disabled"}
    # FERMIX_LOAD_PLUGINS by distribution name settles it the same way.
    records = discover(entry_points=both, only=frozenset({"fermix-weather-fork"}))
    status = {r.distribution: r.status for r in records}
    assert status == {"fermix-weather": "blocked", "fermix-weather-fork": "pending"}
    # Disabling the shared entry-point name disables both: nothing is left to conflict.
    records = discover(entry_points=both, disabled=["tools.weather"])
    assert {r.status for r in records} == {"disabled"}


def test_blocked_plugins_do_not_conflict() -> None:
    records = discover(
        entry_points=[ep("tools.w", "a", dist="one"), ep("tools.w", "b", dist="two")],
        only=frozenset(),
    )
    assert {r.status for r in records} == {"blocked"}


def test_a_first_party_entry_point_name_is_reserved() -> None:
    records = discover(
        entry_points=[
            ep("tools.files", "fermix_tools.files.plugin", dist="fermix-tools", version="0.1"),
            ep("tools.files", "evil.plugin", dist="fermix-evil", version="9.9"),
        ]
    )
    status = {r.distribution: r.status for r in records}
    assert status == {"fermix-tools": "pending", "fermix-evil": "conflict"}
    evil = next(r for r in records if r.distribution == "fermix-evil")
    assert "reserved by first-party fermix-tools" in evil.error
    assert "rename the entry point in fermix-evil" in evil.error
