"""Schedule parsing and next-fire times, with croniter as an independent oracle for cron."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from fermix_core.jobs.schedules import ScheduleError, parse_schedule
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def ts(*args: int, tz: str = "UTC") -> float:
    return datetime(*args, tzinfo=ZoneInfo(tz)).timestamp()


def local(stamp: float, tz: str) -> datetime:
    return datetime.fromtimestamp(stamp, ZoneInfo(tz))


# --------------------------------------------------------------------------- forms


def test_interval_forms_are_canonical() -> None:
    assert parse_schedule("every 15 minutes", "UTC").interval_seconds == 900
    assert parse_schedule("Every  2 hours", "UTC").expression == "every 2 hours"
    assert parse_schedule("every day", "UTC").interval_seconds == 86400
    assert parse_schedule("every 3 days", "UTC").expression == "every 3 days"


def test_interval_counts_from_its_anchor() -> None:
    schedule = parse_schedule("every 10 minutes", "UTC")
    anchor = ts(2026, 1, 1, 12, 0)
    assert schedule.next_after(anchor, anchor=anchor) == anchor + 600
    # Late by 25 minutes: the next fire keeps the cadence instead of drifting.
    assert schedule.next_after(anchor + 1500, anchor=anchor) == anchor + 1800


def test_once_naive_datetime_is_in_the_job_timezone() -> None:
    schedule = parse_schedule("2026-12-24T09:00", "Europe/Berlin")
    assert schedule.kind == "once"
    assert schedule.at == ts(2026, 12, 24, 8, 0)
    assert schedule.expression == "2026-12-24T09:00:00+01:00"
    assert schedule.next_after(schedule.at - 1) == schedule.at
    assert schedule.next_after(schedule.at) is None


def test_once_with_offset_keeps_the_offset() -> None:
    schedule = parse_schedule("2026-06-01T10:00:00Z", "America/New_York")
    assert schedule.at == ts(2026, 6, 1, 10, 0)


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("daily at 8am", "0 8 * * *"),
        ("every day at 18:30", "30 18 * * *"),
        ("weekdays at 9am", "0 9 * * 1-5"),
        ("every monday at 7pm", "0 19 * * 1"),
        ("hourly", "0 * * * *"),
    ],
)
def test_english_is_rejected_with_the_cron_form(text: str, hint: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text, "UTC")
    assert f"'{hint}'" in str(info.value)
    assert "free-form English is not parsed" in str(info.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("60 * * * *", "60 is out of range (0-59)"),
        ("* 24 * * *", "24 is out of range (0-23)"),
        ("* * 0 * *", "0 is out of range (1-31)"),
        ("* * * 13 *", "13 is out of range (1-12)"),
        ("* * * * 8", "8 is out of range (0-7)"),
        ("*/0 * * * *", "a step must be at least 1"),
        ("5/15 * * * *", "a step needs * or a range"),
        ("10-5 * * * *", "runs backwards"),
        ("0 0 L * *", "'L' is not allowed"),
        ("0 0 * * MON", "'MON' is not allowed"),
        ("0 0 * * 1#2", "is not allowed"),
        ("1,,2 * * * *", "is not allowed"),
        ("* * * * * *", "exactly 5 fields"),
        ("0 8 * *", "not a schedule Fermix understands"),
        ("every 0 minutes", "at least 1"),
        ("every 400 days", "longer than a year"),
        ("2026-02-30T10:00", "not a valid ISO 8601 datetime"),
        ("", "empty"),
    ],
)
def test_malformed_schedules_are_rejected(text: str, needle: str) -> None:
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text, "UTC")
    assert needle in str(info.value)


def test_unknown_timezone_is_rejected() -> None:
    with pytest.raises(ScheduleError, match="unknown timezone 'Mars/Olympus'"):
        parse_schedule("0 8 * * *", "Mars/Olympus")
    with pytest.raises(ScheduleError, match="unknown timezone"):
        parse_schedule("every 5 minutes", "../../etc/passwd")


def test_weekday_seven_and_zero_are_sunday() -> None:
    after = ts(2026, 1, 1)  # a Thursday
    for expression in ("0 9 * * 0", "0 9 * * 7"):
        fire = parse_schedule(expression, "UTC").next_after(after)
        assert local(fire, "UTC").strftime("%A %H:%M") == "Sunday 09:00"


def test_steps_lists_and_ranges() -> None:
    schedule = parse_schedule("0 8-18/4 * * *", "UTC")
    after = ts(2026, 3, 2)
    hours = []
    for _ in range(4):
        after = schedule.next_after(after)
        hours.append(local(after, "UTC").hour)
    assert hours == [8, 12, 16, 8]
    schedule = parse_schedule("1,15 0 * * *", "UTC")
    first = schedule.next_after(ts(2026, 3, 2))
    assert local(first, "UTC").minute == 1
    assert local(schedule.next_after(first), "UTC").minute == 15


def test_one_value_range_is_that_value() -> None:
    after = ts(2026, 1, 1)
    assert parse_schedule("5-5 * * * *", "UTC").next_after(after) == after + 300


# --------------------------------------------------------------------------- DST


@pytest.mark.parametrize(
    ("zone", "spring", "autumn"),
    [
        ("America/New_York", (2026, 3, 8), (2026, 11, 1)),
        ("Europe/Berlin", (2026, 3, 29), (2026, 10, 25)),
    ],
)
def test_daily_0230_fires_exactly_once_on_both_transition_days(
    zone: str, spring: tuple[int, int, int], autumn: tuple[int, int, int]
) -> None:
    schedule = parse_schedule("30 2 * * *", zone)
    for day in (spring, autumn):
        start = datetime(*day, tzinfo=ZoneInfo(zone)) - timedelta(days=2)
        fires = []
        cursor = start.timestamp()
        for _ in range(5):
            cursor = schedule.next_after(cursor)
            fires.append(local(cursor, zone))
        dates = [f.date() for f in fires]
        assert len(set(dates)) == len(dates), fires  # one fire per calendar day
        on_day = [f for f in fires if f.date() == datetime(*day).date()]
        assert len(on_day) == 1, fires
        # A skipped 02:30 runs at the first instant after the gap; otherwise at 02:30.
        assert (on_day[0].hour, on_day[0].minute) in ((2, 30), (3, 0))


def test_hourly_cron_across_the_autumn_repeat_keeps_wall_clock() -> None:
    # In the repeated hour Berlin's wall clock shows 02:xx twice; "0 * * * *" fires at
    # each distinct wall-clock hour and never twice within one UTC hour.
    schedule = parse_schedule("0 * * * *", "Europe/Berlin")
    cursor = ts(2026, 10, 24, 23, 0)
    stamps = []
    for _ in range(6):
        cursor = schedule.next_after(cursor)
        stamps.append(cursor)
    gaps = {b - a for a, b in itertools.pairwise(stamps)}
    assert gaps <= {3600.0, 7200.0}


# --------------------------------------------------------------------------- oracle


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high).map(str)
    # Strict ranges only: croniter 7 reads a one-value range such as 5-5 as "*" (cronsim,
    # like cron, reads it as 5; test_one_value_range_is_that_value covers it).
    rng = (
        st.tuples(st.integers(low, high), st.integers(low, high))
        .filter(lambda ab: ab[0] != ab[1])
        .map(lambda ab: f"{min(ab)}-{max(ab)}")
    )
    step = st.integers(1, max(1, (high - low) // 2 + 1))
    stepped = st.one_of(
        step.map(lambda s: f"*/{s}"),
        st.tuples(rng, step).map(lambda rs: f"{rs[0]}/{rs[1]}"),
    )
    item = st.one_of(value, rng, stepped)
    listed = st.lists(item, min_size=2, max_size=3).map(",".join)
    return st.one_of(st.just("*"), item, listed)


# Day-of-month is kept to 1-28 and day-of-week restricted fields are paired with "*" for
# the other so both implementations agree on the (historically inconsistent) OR rule.
cron_expressions = st.one_of(
    st.tuples(_field(0, 59), _field(0, 23), _field(1, 28), _field(1, 12), st.just("*")),
    st.tuples(_field(0, 59), _field(0, 23), st.just("*"), _field(1, 12), _field(0, 7)),
).map(" ".join)
instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=cron_expressions, start=instants, zone=st.sampled_from(["UTC", "Asia/Tokyo"]))
def test_cron_matches_croniter(expression: str, start: datetime, zone: str) -> None:
    schedule = parse_schedule(expression, zone)
    begin = start.replace(microsecond=0)
    oracle = croniter(expression, begin.astimezone(ZoneInfo(zone)))
    cursor = begin.timestamp()
    for _ in range(3):
        cursor = schedule.next_after(cursor)
        expected = oracle.get_next(datetime).timestamp()
        assert cursor == expected, (expression, begin, zone)


@settings(max_examples=100, deadline=None)
@given(
    expression=st.tuples(_field(0, 59), _field(0, 23)).map(lambda mh: f"{mh[0]} {mh[1]} * * *"),
    start=instants,
    zone=st.sampled_from(["America/New_York", "Europe/Berlin", "Australia/Sydney"]),
)
def test_daily_cron_in_dst_zones_matches_croniter_off_transition(
    expression: str, start: datetime, zone: str
) -> None:
    """Away from transition nights both agree on every DST zone's wall clock."""
    tz = ZoneInfo(zone)
    begin = start.replace(microsecond=0)
    probe = begin.astimezone(tz)
    window = [probe + timedelta(hours=h) for h in range(0, 72)]
    if len({w.utcoffset() for w in window}) > 1:
        return  # a transition falls in the window: covered by the explicit DST tests
    schedule = parse_schedule(expression, zone)
    fire = schedule.next_after(begin.timestamp())
    expected = croniter(expression, probe).get_next(datetime).timestamp()
    assert fire == expected
