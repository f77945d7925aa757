"""When a schedule fires next: cron expressions and fixed intervals, with time zones.

Pure functions, no I/O: the store calls them to advance ``next_run_at`` and to
refuse a bad schedule before anything is written. Every datetime that goes in
or comes out is timezone-aware and is returned in UTC; the schedule's own time
zone only decides which wall-clock times match the expression.

Expressions have 5 fields (minute hour day-of-month month day-of-week) or 6,
where the extra field is a *leading* seconds field (``second minute hour dom
month dow``). The macros ``@yearly``, ``@annually``, ``@monthly``, ``@weekly``,
``@daily``, ``@midnight`` and ``@hourly`` are accepted. Parsing and matching
are cronsim's (the syntax of Debian cron plus ``L``, ``LW`` and ``#``).

Daylight-saving changes follow Debian cron, so a schedule means what its
author would expect:

* An expression with a fixed minute *and* hour (``30 2 * * *``) names a
  wall-clock time. When a spring-forward gap swallows that time, the run
  happens when the clock jumps past it (02:30 becomes 03:00 on the day
  Europe/Berlin moves to summer time). When a fall-back repeats that time,
  it runs once, on the first pass.
* Any other expression (``*/15 * * * *``, ``0 * * * *``) measures real time:
  it matches the local clock as it actually runs, so the wall times a gap
  skips never fire and a repeated hour fires in both passes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from jobrun.errors import InvalidSchedule

__all__ = ["next_fire", "next_interval", "validate_cron", "validate_timezone"]

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Longest run of missing wall-clock time to walk across when a gap swallows a
# wall-clock run; real zones jump at most a few hours, this bounds the loop.
_MAX_GAP = timedelta(days=1)


def _zone(timezone: str) -> ZoneInfo:
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InvalidSchedule(f"unknown time zone {timezone!r}") from exc


def validate_timezone(timezone: str) -> None:
    """Raise InvalidSchedule unless ``timezone`` is a known IANA time zone."""
    _zone(timezone)


def _fields(expr: str) -> list[str]:
    text = expr.strip()
    text = _MACROS.get(text.lower(), text)
    fields = text.split()
    if len(fields) not in (5, 6):
        raise InvalidSchedule(
            f"cron expression {expr!r} has {len(fields)} fields; expected 5 "
            "(minute hour day-of-month month day-of-week) or 6 with a leading seconds field"
        )
    return fields


def _is_wall_clock(fields: list[str]) -> bool:
    """Whether the expression names fixed wall-clock times (see the module docstring)."""
    minute, hour = fields[-5], fields[-4]
    return not minute.startswith("*") and not hour.startswith("*")


def _aware_utc(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSchedule(f"{name} must be timezone-aware")
    return value.astimezone(UTC)


def _exists(local: datetime, zone: ZoneInfo) -> bool:
    """Whether a naive wall-clock time happens in ``zone`` (is not inside a gap)."""
    aware = local.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == local


def _refusal(expr: str, exc: Exception) -> InvalidSchedule:
    """The one message for an expression cronsim rejects or that never matches a date."""
    if isinstance(exc, StopIteration):
        return InvalidSchedule(
            f"cron expression {expr!r} never fires: no date in 50 years matches it"
        )
    return InvalidSchedule(f"cron expression {expr!r} is invalid: {exc}")


def validate_cron(expr: str, timezone: str) -> None:
    """Raise :class:`InvalidSchedule` unless ``expr`` is a cron expression that fires.

    The message names the expression and what is wrong with it: the field
    count, the field cronsim rejected, or that it never matches a real date.
    """
    zone = _zone(timezone)
    fields = _fields(expr)
    try:
        sim = CronSim(" ".join(fields), datetime(2000, 1, 1, tzinfo=zone))
        next(sim)
    except (CronSimError, StopIteration) as exc:
        raise _refusal(expr, exc) from exc


def next_fire(expr: str, timezone: str, after: datetime) -> datetime:
    """The first time strictly after ``after`` that ``expr`` matches in ``timezone``, in UTC.

    ``after`` must be aware; so is the result. See the module docstring for
    what happens around daylight-saving changes.
    """
    after_utc = _aware_utc(after, "after")
    zone = _zone(timezone)
    fields = _fields(expr)
    wall_clock = _is_wall_clock(fields)
    local = after_utc.astimezone(zone)
    try:
        if wall_clock:
            # Walk naive wall-clock time, then place each match on the real
            # timeline ourselves; cronsim's own fix-up covers 5 fields only.
            sim = CronSim(" ".join(fields), local.replace(tzinfo=None))
        else:
            sim = CronSim(" ".join(fields), local)
        while True:
            candidate = next(sim)
            fire = _place_wall_clock(candidate, zone) if wall_clock else candidate.astimezone(UTC)
            # A wall-clock match inside a repeated hour can land before
            # ``after`` (it already ran on the first pass): skip it.
            if fire > after_utc:
                return fire
    except (CronSimError, StopIteration) as exc:
        raise _refusal(expr, exc) from exc


def _place_wall_clock(local: datetime, zone: ZoneInfo) -> datetime:
    """Put a naive wall-clock match on the UTC timeline, Debian-cron style."""
    if _exists(local, zone):
        # fold=0 picks the first pass of a repeated hour.
        return local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    # Inside a gap: run at the first minute the clock shows after jumping.
    probe = local.replace(second=0, microsecond=0)
    limit = probe + _MAX_GAP
    while not _exists(probe, zone):
        probe += timedelta(minutes=1)
        if probe > limit:  # pragma: no cover - no real zone has such a gap
            raise InvalidSchedule(f"time zone {zone.key!r} skips more than a day")
    return probe.replace(tzinfo=zone, fold=0).astimezone(UTC)


def next_interval(every: timedelta, anchor: datetime, after: datetime) -> datetime:
    """The first ``anchor + k * every`` (k >= 0) strictly after ``after``, in UTC.

    Runs stay on the anchor's grid however late the caller is, so an interval
    schedule does not drift by the scheduler's tick. ``every`` must be positive.
    """
    if every <= timedelta(0):
        raise InvalidSchedule(f"interval {every} is not positive")
    anchor_utc = _aware_utc(anchor, "anchor")
    after_utc = _aware_utc(after, "after")
    if anchor_utc > after_utc:
        return anchor_utc
    # timedelta // timedelta is exact integer arithmetic on microseconds.
    steps = (after_utc - anchor_utc) // every + 1
    return anchor_utc + every * steps
