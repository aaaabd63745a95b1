"""Schedule expressions: every N minutes|hours|days, one ISO 8601 datetime, or 5-field cron.

A schedule is parsed once when a job is created or changed (bad input is rejected then,
with a message that shows the accepted forms) and again every time the scheduler computes
the next fire, because a stored row can be edited or corrupted behind the daemon's back;
the second parse failing is what moves a job to ``disabled``.

Cron evaluation is delegated to `cronsim <https://pypi.org/project/cronsim/>`_, which
computes occurrences in the zone of the start datetime and handles DST the way Debian's
cron does: a time inside the skipped spring-forward hour fires once, at the first instant
after the gap, and a time inside the repeated autumn hour fires once, on its first
occurrence. Before cronsim sees an expression it passes this module's own grammar check,
because cronsim also accepts extensions (``L``, ``W``, ``#``, month and day names) that
the documented form does not include: each field is ``*``, a value, a range ``a-b``, a step
over ``*`` or a range (``*/15``, ``8-18/4``), or a comma list of those.

All instants here are Unix timestamps (``float`` seconds, UTC).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = [
    "CRON_FIELDS",
    "Schedule",
    "ScheduleError",
    "ScheduleKind",
    "cron_hint",
    "load_zone",
    "parse_schedule",
]

ScheduleKind = Literal["interval", "once", "cron"]

#: The five cron fields with their inclusive ranges (weekday 7 is Sunday, like 0).
CRON_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)

FORMS = (
    "use one of: an interval ('every 15 minutes', 'every 2 hours', 'every 1 day'), one ISO "
    "8601 datetime ('2026-12-24T09:00' in the job's timezone, or with an offset such as "
    "'2026-12-24T09:00+01:00'), or a 5-field cron expression 'minute hour day-of-month month "
    "day-of-week' ('0 8 * * *' is every day at 08:00, '*/15 9-17 * * 1-5' every 15 minutes "
    "during weekday office hours)"
)

_INTERVAL = re.compile(
    r"^every\s+(?:(?P<n>\d+)\s*)?(?P<unit>minutes?|mins?|hours?|hrs?|days?)$", re.IGNORECASE
)
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
#: Longest interval accepted: a year of days (anything longer is a once job).
_MAX_INTERVAL_SECONDS = 366 * 86400
#: Longer input is refused before any parsing (and is never echoed back).
MAX_SCHEDULE_CHARS = 100
_ITEM = re.compile(r"^(?:\*|\d+(?:-\d+)?)(?:/\d+)?$")
_LOOKS_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}")


class ScheduleError(ValueError):
    """A schedule or timezone that cannot be used; the message says what to write instead."""


@lru_cache(maxsize=256)
def load_zone(name: str) -> ZoneInfo:
    """The IANA zone *name*, or :class:`ScheduleError` naming it."""
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError("timezone is empty; give an IANA zone such as 'Europe/Berlin'")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            f"unknown timezone {name!r}; give an IANA zone name such as 'America/New_York', "
            "'Europe/Berlin' or 'UTC'"
        ) from None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A parsed schedule. ``expression`` is its canonical text, the form stored on the job."""

    kind: ScheduleKind
    expression: str
    timezone: str
    interval_seconds: int | None = None
    at: float | None = None

    def next_after(self, after: float, *, anchor: float | None = None) -> float | None:
        """The first fire strictly after *after*, or ``None`` when there is none.

        *anchor* is where an interval's cadence starts (the job's creation time, or its
        last scheduled fire); without one the interval counts from *after*.
        """
        if self.kind == "once":
            assert self.at is not None
            return self.at if self.at > after else None
        if self.kind == "interval":
            assert self.interval_seconds is not None
            step = self.interval_seconds
            if anchor is None:
                return after + step
            if anchor > after:
                return anchor
            return anchor + (int((after - anchor) // step) + 1) * step
        return _cron_next(self.expression, self.timezone, after)

    def describe(self) -> str:
        if self.kind == "interval":
            return f"every {_plural(self.interval_seconds or 0)}"
        if self.kind == "once":
            return f"once at {self.expression}"
        return f"cron '{self.expression}' ({self.timezone})"


def _plural(seconds: int) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds} seconds"


def parse_schedule(text: str, timezone: str) -> Schedule:
    """Parse *text* for a job in *timezone*; raises :class:`ScheduleError` with guidance."""
    zone_name = timezone.strip() if isinstance(timezone, str) else timezone
    zone = load_zone(zone_name)
    if not isinstance(text, str) or not text.strip():
        raise ScheduleError(f"the schedule is empty; {FORMS}")
    raw = " ".join(text.split())
    if len(raw) > MAX_SCHEDULE_CHARS:
        raise ScheduleError(
            f"the schedule is {len(raw)} characters long; a schedule is at most "
            f"{MAX_SCHEDULE_CHARS} — {FORMS}"
        )
    if match := _INTERVAL.match(raw):
        return _interval(match, raw, zone_name)
    if _LOOKS_ISO.match(raw):
        return _once(raw, zone, zone_name)
    fields = raw.split(" ")
    if len(fields) == 5 and all(re.fullmatch(r"[\d*/,\-]+", f) for f in fields):
        return Schedule("cron", _check_cron(fields), zone_name)
    if len(fields) in (5, 6, 7) and all(re.fullmatch(r"[\w*/,\-?#]+", f) for f in fields):
        # Looks like cron with something outside the documented grammar.
        _check_cron(fields)
    hint = cron_hint(raw)
    if hint:
        raise ScheduleError(
            f"{text!r} is not a schedule Fermix understands (free-form English is not parsed); "
            f"write it as cron: {hint}. Otherwise {FORMS}"
        )
    raise ScheduleError(f"{text!r} is not a schedule Fermix understands; {FORMS}")


def _interval(match: re.Match[str], raw: str, zone_name: str) -> Schedule:
    count = int(match["n"]) if match["n"] else 1
    seconds = count * _UNIT_SECONDS[match["unit"][0].lower()]
    if count < 1:
        raise ScheduleError(f"{raw!r}: an interval must be at least 1; {FORMS}")
    if seconds > _MAX_INTERVAL_SECONDS:
        raise ScheduleError(
            f"{raw!r} is longer than a year; use a cron expression or a once datetime instead"
        )
    return Schedule("interval", f"every {_plural(seconds)}", zone_name, interval_seconds=seconds)


def _once(raw: str, zone: ZoneInfo, zone_name: str) -> Schedule:
    try:
        moment = datetime.fromisoformat(raw.replace(" ", "T", 1) if "T" not in raw else raw)
    except ValueError:
        raise ScheduleError(
            f"{raw!r} is not a valid ISO 8601 datetime (write '2026-12-24T09:00', optionally "
            "with an offset such as '+01:00' or 'Z')"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    at = moment.timestamp()
    canonical = datetime.fromtimestamp(at, moment.tzinfo).isoformat(timespec="seconds")
    return Schedule("once", canonical, zone_name, at=at)


def _check_cron(fields: list[str]) -> str:
    if len(fields) != 5:
        raise ScheduleError(
            f"a cron expression has exactly 5 fields (minute hour day-of-month month "
            f"day-of-week), got {len(fields)}: {' '.join(fields)!r}"
        )
    for value, (name, low, high) in zip(fields, CRON_FIELDS, strict=True):
        for item in value.split(","):
            _check_item(item, name, low, high, value)
    expression = " ".join(fields)
    from cronsim import CronSim, CronSimError

    try:
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:  # pragma: no cover - the grammar check above is stricter
        raise ScheduleError(f"invalid cron expression {expression!r}: {exc}") from None
    return expression


def _check_item(item: str, name: str, low: int, high: int, field: str) -> None:
    where = f"cron {name} field {field!r}"
    if not _ITEM.match(item):
        raise ScheduleError(
            f"{where}: {item!r} is not allowed; each field is *, a number, a range a-b, a step "
            f"*/n or a-b/n, or a comma list of those (numbers only, {low}-{high})"
        )
    base, _, step = item.partition("/")
    if step:
        if int(step) < 1:
            raise ScheduleError(f"{where}: a step must be at least 1")
        if base != "*" and "-" not in base:
            raise ScheduleError(
                f"{where}: a step needs * or a range before it ('*/{step}' or "
                f"'{base}-{high}/{step}'), not a single value"
            )
    if base == "*":
        return
    start, _, end = base.partition("-")
    for number in (start, end) if end else (start,):
        if not low <= int(number) <= high:
            raise ScheduleError(f"{where}: {number} is out of range ({low}-{high})")
    if end and int(start) > int(end):
        raise ScheduleError(f"{where}: range {base} runs backwards; write the smaller value first")


def _cron_next(expression: str, zone_name: str, after: float) -> float | None:
    from cronsim import CronSim, CronSimError

    zone = load_zone(zone_name)
    start = datetime.fromtimestamp(after, zone)
    try:
        sim = CronSim(expression, start)
        nxt = next(sim)
    except StopIteration:
        return None
    except CronSimError as exc:
        raise ScheduleError(f"invalid cron expression {expression!r}: {exc}") from None
    stamp = nxt.timestamp()
    if stamp <= after:  # cronsim starts at the next whole minute; keep "strictly after"
        stamp = next(sim).timestamp()
    return stamp


_TIME = r"(?P<h>\d{1,2})(?::(?P<m>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)?"
_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"^(?:every\s+day|daily|each\s+day|every\s+morning)\s+at\s+{_TIME}$", re.I), "*"),
    (re.compile(rf"^(?:every\s+)?weekdays?\s+at\s+{_TIME}$", re.I), "1-5"),
    (re.compile(rf"^(?:every\s+)?weekends?\s+at\s+{_TIME}$", re.I), "0,6"),
    (re.compile(rf"^at\s+{_TIME}(?:\s+every\s+day|\s+daily)?$", re.I), "*"),
)
_WEEKDAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_ON_DAY = re.compile(
    rf"^(?:every\s+|weekly\s+on\s+|on\s+)?(?P<day>[a-z]+?)s?\s+at\s+{_TIME}$", re.I
)


def cron_hint(text: str) -> str | None:
    """The cron form of a few common English phrasings, for the rejection message only."""
    raw = " ".join(text.lower().split())
    if raw in ("hourly", "every hour"):
        return "'0 * * * *'"
    if raw in ("daily", "every day", "every midnight", "nightly"):
        return "'0 0 * * *'"
    if raw in ("weekly", "every week"):
        return "'0 0 * * 0'"
    if raw in ("monthly", "every month"):
        return "'0 0 1 * *'"
    for pattern, weekday in _HINTS:
        if match := pattern.match(raw):
            return _time_hint(match, weekday)
    if (match := _ON_DAY.match(raw)) and match["day"] in _WEEKDAYS:
        return _time_hint(match, str(_WEEKDAYS.index(match["day"])))
    return None


def _time_hint(match: re.Match[str], weekday: str) -> str | None:
    hour, minute = int(match["h"]), int(match["m"] or 0)
    ampm = (match["ampm"] or "").replace(".", "")
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    if not (0 <= hour <= 23 and 0 <= minute <= 59):
        return None
    return f"'{minute} {hour} * * {weekday}'"


def utc_iso(stamp: float | None) -> str | None:
    """A stored instant as ISO 8601 UTC text (what tools and the CLI show)."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds")


def local_iso(stamp: float | None, zone_name: str) -> str | None:
    if stamp is None:
        return None
    try:
        zone = load_zone(zone_name)
    except ScheduleError:
        return utc_iso(stamp)
    return datetime.fromtimestamp(stamp, zone).isoformat(timespec="seconds")
