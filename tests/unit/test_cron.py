"""jobrun.cron: parsing, next fire times, daylight-saving changes, intervals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobrun.cron import next_fire, next_interval, validate_cron
from jobrun.errors import InvalidSchedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def local(zone: ZoneInfo, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=zone, fold=fold)


def fires(expr: str, tz: str, start: datetime, n: int) -> list[datetime]:
    out = []
    at = start
    for _ in range(n):
        at = next_fire(expr, tz, at)
        out.append(at)
    return out


# --- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr",
    [
        "* * * * *",
        "*/15 9-17 * * MON-FRI",
        "0 0 1 JAN *",
        "0 0 L * *",
        "0 12 * * 5L",
        "0 12 * * MON#2",
        "30 */5 * * * *",  # six fields: leading seconds
        "@daily",
        "@HOURLY",
        "0 0 29 2 *",
    ],
)
def test_validate_cron_accepts_valid_expressions(expr: str) -> None:
    validate_cron(expr, "UTC")


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("* * * *", "has 4 fields"),
        ("* * * * * * *", "has 7 fields"),
        ("", "has 0 fields"),
        ("61 * * * *", "Bad minute"),
        ("* 24 * * *", "Bad hour"),
        ("* * 0 * *", "Bad day-of-month"),
        ("* * * 13 *", "Bad month"),
        ("* * * * FOO", "Bad day-of-week"),
        ("*/0 * * * *", "Bad minute"),
        ("0 0 30 2 *", "Bad day-of-month"),
        ("60 * * * * *", "Bad second"),
        ("@fortnightly", "has 1 fields"),
    ],
)
def test_validate_cron_names_expression_and_problem(expr: str, fragment: str) -> None:
    with pytest.raises(InvalidSchedule) as info:
        validate_cron(expr, "UTC")
    assert repr(expr) in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize("tz", ["Mars/Olympus_Mons", "", "../etc/passwd", "Europe/"])
def test_unknown_time_zone_is_invalid_schedule(tz: str) -> None:
    with pytest.raises(InvalidSchedule, match="unknown time zone"):
        validate_cron("* * * * *", tz)
    with pytest.raises(InvalidSchedule, match="unknown time zone"):
        next_fire("* * * * *", tz, utc(2024, 1, 1))


def test_next_fire_rejects_invalid_expression() -> None:
    with pytest.raises(InvalidSchedule, match="'nope'"):
        next_fire("nope", "UTC", utc(2024, 1, 1))


def test_next_fire_requires_aware_after() -> None:
    with pytest.raises(InvalidSchedule, match="timezone-aware"):
        next_fire("* * * * *", "UTC", datetime(2024, 1, 1))


# --- plain next fire --------------------------------------------------------------------


def test_next_fire_is_strictly_after_an_exact_match() -> None:
    assert next_fire("0 12 * * *", "UTC", utc(2024, 5, 1, 12)) == utc(2024, 5, 2, 12)
    assert next_fire("0 12 * * *", "UTC", utc(2024, 5, 1, 11, 59, 59, 999999)) == utc(
        2024, 5, 1, 12
    )


def test_next_fire_returns_utc() -> None:
    got = next_fire("0 9 * * *", "America/New_York", utc(2024, 1, 10))
    assert got.tzinfo is UTC
    assert got == utc(2024, 1, 10, 14)  # 09:00 EST


def test_next_fire_accepts_any_aware_after() -> None:
    after = datetime(2024, 1, 10, 1, 0, tzinfo=BERLIN)  # 00:00 UTC
    assert next_fire("0 * * * *", "UTC", after) == utc(2024, 1, 10, 1)


def test_six_fields_have_leading_seconds() -> None:
    assert fires("*/20 * * * * *", "UTC", utc(2024, 1, 1), 3) == [
        utc(2024, 1, 1, 0, 0, 20),
        utc(2024, 1, 1, 0, 0, 40),
        utc(2024, 1, 1, 0, 1, 0),
    ]


def test_macro_daily() -> None:
    assert next_fire("@daily", "UTC", utc(2024, 1, 1, 5)) == utc(2024, 1, 2)


def test_day_of_month_or_day_of_week_follow_cron() -> None:
    # Both restricted: either matches (the 13th or any Friday).
    got = fires("0 0 13 * FRI", "UTC", utc(2024, 9, 1), 3)
    assert got == [utc(2024, 9, 6), utc(2024, 9, 13), utc(2024, 9, 20)]


# --- daylight-saving changes ------------------------------------------------------------
# Europe/Berlin: 2024-03-31 02:00 CET -> 03:00 CEST; 2024-10-27 03:00 CEST -> 02:00 CET.
# America/New_York: 2024-03-10 02:00 EST -> 03:00 EDT; 2024-11-03 02:00 EDT -> 01:00 EST.


def test_spring_forward_gap_runs_wall_clock_job_when_clock_jumps_berlin() -> None:
    got = fires("30 2 * * *", "Europe/Berlin", utc(2024, 3, 29, 12), 3)
    assert got == [
        local(BERLIN, 2024, 3, 30, 2, 30).astimezone(UTC),
        local(BERLIN, 2024, 3, 31, 3, 0).astimezone(UTC),  # 02:30 does not exist
        local(BERLIN, 2024, 4, 1, 2, 30).astimezone(UTC),
    ]


def test_spring_forward_gap_runs_wall_clock_job_when_clock_jumps_new_york() -> None:
    got = fires("15 2 * * *", "America/New_York", utc(2024, 3, 8, 12), 3)
    assert got == [
        local(NEW_YORK, 2024, 3, 9, 2, 15).astimezone(UTC),
        local(NEW_YORK, 2024, 3, 10, 3, 0).astimezone(UTC),
        local(NEW_YORK, 2024, 3, 11, 2, 15).astimezone(UTC),
    ]


def test_spring_forward_six_field_wall_clock_job_runs_once() -> None:
    got = fires("0 30 2 * * *", "Europe/Berlin", utc(2024, 3, 30, 12), 2)
    assert got == [
        local(BERLIN, 2024, 3, 31, 3, 0).astimezone(UTC),
        local(BERLIN, 2024, 4, 1, 2, 30).astimezone(UTC),
    ]


def test_fall_back_runs_wall_clock_job_once_berlin() -> None:
    got = fires("30 2 * * *", "Europe/Berlin", utc(2024, 10, 26, 12), 2)
    assert got == [
        local(BERLIN, 2024, 10, 27, 2, 30, fold=0).astimezone(UTC),  # first pass, CEST
        local(BERLIN, 2024, 10, 28, 2, 30).astimezone(UTC),
    ]


def test_fall_back_runs_wall_clock_job_once_new_york() -> None:
    got = fires("30 1 * * *", "America/New_York", utc(2024, 11, 2, 12), 2)
    assert got == [
        local(NEW_YORK, 2024, 11, 3, 1, 30, fold=0).astimezone(UTC),  # EDT
        local(NEW_YORK, 2024, 11, 4, 1, 30).astimezone(UTC),
    ]


def test_fall_back_second_pass_does_not_refire_earlier_wall_clock_time() -> None:
    # Asked during the second 02:xx (CET), a 02:45 job already ran on the first pass.
    after = local(BERLIN, 2024, 10, 27, 2, 30, fold=1)
    assert next_fire("45 2 * * *", "Europe/Berlin", after) == local(
        BERLIN, 2024, 10, 28, 2, 45
    ).astimezone(UTC)


def test_fall_back_hourly_job_follows_real_time_berlin() -> None:
    got = fires("0 * * * *", "Europe/Berlin", utc(2024, 10, 26, 23, 30), 4)
    # Every real hour: 01:00 CEST, 02:00 CEST, 02:00 CET, 03:00 CET.
    assert got == [utc(2024, 10, 27, h) for h in (0, 1, 2, 3)]


def test_spring_forward_interval_expression_follows_real_time_new_york() -> None:
    got = fires("*/30 * * * *", "America/New_York", utc(2024, 3, 10, 6, 15), 4)
    # 01:30 EST, then 03:00 EDT (02:xx does not exist), 03:30 EDT.
    assert got == [
        utc(2024, 3, 10, 6, 30),
        utc(2024, 3, 10, 7, 0),
        utc(2024, 3, 10, 7, 30),
        utc(2024, 3, 10, 8, 0),
    ]


# --- properties -------------------------------------------------------------------------

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata"]
EXPRESSIONS = [
    "* * * * *",
    "*/7 * * * *",
    "0 * * * *",
    "30 2 * * *",
    "0 0 * * MON",
    "15 3 1 * *",
    "0 9-17/2 * * 1-5",
    "*/45 * * * * *",
    "0 30 2 * * *",
]

instants = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


@settings(max_examples=300, deadline=None)
@given(expr=st.sampled_from(EXPRESSIONS), tz=st.sampled_from(ZONES), after=instants)
def test_next_fire_is_after_and_aware_utc(expr: str, tz: str, after: datetime) -> None:
    fire = next_fire(expr, tz, after)
    assert fire > after
    assert fire.tzinfo is UTC
    assert fire.microsecond == 0
    # And it is a fixed point: asking just before it returns it again.
    assert next_fire(expr, tz, fire - timedelta(microseconds=1)) == fire


@settings(max_examples=300, deadline=None)
@given(
    expr=st.sampled_from(["*/7 * * * *", "0 * * * *", "0 0 * * MON", "0 9-17/2 * * 1-5"]),
    tz=st.sampled_from(ZONES),
    after=instants,
)
def test_real_time_fire_matches_expression_on_local_clock(
    expr: str, tz: str, after: datetime
) -> None:
    fire = next_fire(expr, tz, after).astimezone(ZoneInfo(tz))
    minute, hour, _, _, dow = expr.split()
    assert fire.second == 0
    if minute.startswith("*/"):
        assert fire.minute % int(minute[2:]) == 0
    else:
        assert fire.minute == int(minute)
    if hour == "9-17/2":
        assert fire.hour in (9, 11, 13, 15, 17)
    if dow == "MON":
        assert fire.weekday() == 0
    if dow == "1-5":
        assert fire.weekday() < 5


@settings(max_examples=200, deadline=None)
@given(expr=st.sampled_from(EXPRESSIONS), tz=st.sampled_from(ZONES), after=instants)
def test_next_fire_skips_nothing(expr: str, tz: str, after: datetime) -> None:
    # No instant between after and the fire time is itself a fire time.
    first = next_fire(expr, tz, after)
    second = next_fire(expr, tz, first)
    assert second > first


@settings(max_examples=300, deadline=None)
@given(
    every=st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=40)),
    anchor=instants,
    after=instants,
)
def test_next_interval_is_next_grid_point(
    every: timedelta, anchor: datetime, after: datetime
) -> None:
    got = next_interval(every, anchor, after)
    assert got > after
    assert (got - anchor) % every == timedelta(0)
    assert got >= anchor
    if got > anchor:
        assert got - every <= after


def test_next_interval_before_anchor_returns_anchor() -> None:
    anchor = utc(2024, 1, 1, 12)
    assert next_interval(timedelta(minutes=5), anchor, utc(2024, 1, 1)) == anchor


def test_next_interval_skips_missed_runs() -> None:
    anchor = utc(2024, 1, 1)
    after = utc(2024, 1, 1, 3, 7)
    assert next_interval(timedelta(minutes=10), anchor, after) == utc(2024, 1, 1, 3, 10)
    assert next_interval(timedelta(minutes=10), anchor, utc(2024, 1, 1, 3, 10)) == utc(
        2024, 1, 1, 3, 20
    )


def test_next_interval_rejects_non_positive() -> None:
    with pytest.raises(InvalidSchedule, match="not positive"):
        next_interval(timedelta(0), utc(2024, 1, 1), utc(2024, 1, 1))


def test_validate_timezone_names_the_unknown_zone() -> None:
    from jobrun.cron import validate_timezone

    validate_timezone("Europe/Berlin")
    with pytest.raises(InvalidSchedule, match="Mars/Olympus"):
        validate_timezone("Mars/Olympus")
