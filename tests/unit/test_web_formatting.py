"""The dashboard's one format for durations, times and job ids, at each boundary."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

import pytest

from jobrun.domain.ids import new_job_id, new_job_ids
from jobrun.web.formatting import absolute, duration, relative, short_id, sparkline, when

NOW = datetime(2026, 12, 4, 14, 20, 21, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (0, "0 ms"),
        (0.0004, "0 ms"),
        (0.0005, "0 ms"),  # rounds half to even
        (0.850, "850 ms"),
        (0.9994, "999 ms"),
        (0.9996, "1.0 s"),  # 1000 ms is a second
        (1, "1.0 s"),
        (12.44, "12.4 s"),
        (59.94, "59.9 s"),
        (59.96, "1 min 00 s"),  # not "60.0 s"
        (60, "1 min 00 s"),
        (185, "3 min 05 s"),
        (3599.4, "59 min 59 s"),
        (3599.6, "1 h 00 min"),  # not "60 min 00 s"
        (3600, "1 h 00 min"),
        (7800, "2 h 10 min"),
        (86399, "23 h 59 min"),
        (86400, "1 d 00 h"),
        (3 * 86400 + 4 * 3600 + 59 * 60, "3 d 04 h"),
        (400 * 86400, "400 d 00 h"),
        (-2.5, "-2.5 s"),
        (-0.2, "-200 ms"),
    ],
)
def test_a_duration_has_one_format_at_every_size(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown
    assert duration(timedelta(seconds=seconds)) == shown


def test_no_duration_is_empty() -> None:
    assert duration(None) == ""


def test_an_absolute_time_is_utc_with_its_zone_whatever_zone_it_came_in() -> None:
    assert absolute(NOW) == "2026-12-04 14:20:21 UTC"
    berlin = NOW.astimezone(timezone(timedelta(hours=1)))
    assert absolute(berlin) == "2026-12-04 14:20:21 UTC"


@pytest.mark.parametrize(
    ("offset", "shown"),
    [
        (0, "just now"),
        (-0.9, "just now"),
        (0.9, "just now"),
        (-1, "1.0 s ago"),
        (-185.7, "3 min 05 s ago"),  # whole seconds: not rounded up to 06
        (7800, "in 2 h 10 min"),
        (-(3 * 86400 + 4 * 3600), "3 d 04 h ago"),
        (59.9, "in 59.0 s"),
    ],
)
def test_a_relative_time_says_ago_or_in(offset: float, shown: str) -> None:
    assert relative(NOW + timedelta(seconds=offset), NOW) == shown


def test_a_time_element_carries_the_machine_time_and_the_zone() -> None:
    shown = str(when(NOW - timedelta(minutes=3), NOW))
    assert shown == (
        '<time datetime="2026-12-04T14:17:21Z" title="2026-12-04 14:17:21 UTC">'
        "3 min 00 s ago</time>"
    )
    full = str(when(NOW + timedelta(hours=2), NOW, full=True))
    assert full == (
        '<time datetime="2026-12-04T16:20:21Z" title="2026-12-04 16:20:21 UTC">'
        'in 2 h 00 min <span class="abs">(2026-12-04 16:20:21 UTC)</span></time>'
    )
    assert str(when(None, NOW)) == ""


@pytest.mark.parametrize("made", ["one by one", "in a batch"])
def test_short_ids_of_jobs_made_together_differ(made: str) -> None:
    # A batch's ids share a millisecond and many count up from the one before:
    # they differ in their last digits only, which the short form keeps.
    ids = [new_job_id() for _ in range(1000)] if made == "one by one" else new_job_ids(1000)
    # UUIDv7: ids made in the same millisecond share their leading digits.
    assert len({str(i)[:8] for i in ids}) < 5
    shown = {short_id(i) for i in ids}
    assert len(shown) == len(ids)
    assert all(re.fullmatch(r"…[0-9a-f]{12}", s) for s in shown)


def test_a_short_id_is_the_ids_last_twelve_hex_digits() -> None:
    value = UUID("0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")
    assert short_id(value) == "…0c1d2e3f4a5b"
    assert short_id(str(value)) == "…0c1d2e3f4a5b"


def test_a_sparkline_draws_in_the_current_colour_and_survives_no_samples() -> None:
    assert 'stroke="currentColor"' in sparkline([1, 3, 2])
    assert "peak 1" in sparkline([])
