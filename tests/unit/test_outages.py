"""The outage log: one line when the database is lost, one when it answers again."""

from __future__ import annotations

import logging

import pytest

from jobrun.errors import DatabaseFull, DatabaseUnavailable, InvalidJob, PoolExhausted
from jobrun.outages import (
    SETTLE_SECONDS,
    DriverChurnHeld,
    OutageLog,
    hold_driver_churn,
    is_outage,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def unavailable(reason: str = "connection refused") -> DatabaseUnavailable:
    return DatabaseUnavailable("127.0.0.1", "5432", "jobs", reason)


def test_what_counts_as_an_outage() -> None:
    assert is_outage(unavailable())
    assert is_outage(DatabaseFull("h", "1", "d", "could not extend file"))
    assert is_outage(ConnectionRefusedError())
    assert is_outage(TimeoutError())
    assert not is_outage(PoolExhausted("h", "1", "d", 8, 30.0))
    assert not is_outage(InvalidJob("bad payload"))
    assert not is_outage(ValueError("bug"))


def test_an_outage_is_one_line_when_lost_and_one_when_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    outages = OutageLog(logging.getLogger("test.database"), clock)
    claims = outages.part(logging.getLogger("test.claims"), "claims working again")
    beats = outages.part(logging.getLogger("test.beats"), "heartbeats working again")

    for _ in range(5):
        claims.failed(unavailable(), "claim failed: %s", "refused")
        beats.failed(unavailable(), "heartbeat failed")
    assert outages.down
    clock.now += 12.34
    claims.ok()
    beats.ok()
    assert not outages.down

    shown = [
        (r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO
    ]
    assert shown == [
        (
            "test.database",
            "WARNING",
            "database unavailable, retrying until it answers: cannot reach PostgreSQL at "
            "127.0.0.1:5432, database 'jobs': connection refused",
        ),
        (
            "test.database",
            "WARNING",
            "database answers again after 12.3s (9 failed tries not logged)",
        ),
    ]
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert debug.count("claim failed: refused") == 5
    assert debug.count("heartbeat failed") == 5
    assert "claims working again" in debug and "heartbeats working again" in debug
    assert outages.outages == 1


def test_a_failure_that_is_not_an_outage_is_the_part_s_own_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    outages = OutageLog(logging.getLogger("test.database"), Clock())
    reaper = outages.part(logging.getLogger("test.reaper"), "reaper working again")
    reaper.failed(ValueError("a bug"), "reaper pass failed: %s", "a bug")
    reaper.ok()
    shown = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert shown == [("WARNING", "reaper pass failed: a bug"), ("INFO", "reaper working again")]
    assert outages.outages == 0


def test_a_failure_just_after_the_end_is_the_same_outage_and_a_later_one_a_new_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="test.database")
    clock = Clock()
    outages = OutageLog(logging.getLogger("test.database"), clock)
    assert outages.failed(unavailable())
    outages.answered()
    clock.now += SETTLE_SECONDS / 2
    assert outages.failed(unavailable("a pooled connection the restart broke"))
    assert not outages.down
    assert outages.aftershocks == 1
    clock.now += SETTLE_SECONDS
    assert outages.failed(unavailable("down again"))
    assert outages.down
    assert outages.outages == 2
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and lines[-1].endswith("down again")


def test_psycopg_connection_churn_is_held_unless_jobrun_logs_debug() -> None:
    held = DriverChurnHeld()

    def record(msg: str, level: int = logging.WARNING) -> logging.LogRecord:
        return logging.LogRecord("psycopg.pool", level, __file__, 1, msg, ("x",), None)

    jobrun_log = logging.getLogger("jobrun")
    before = jobrun_log.level
    try:
        jobrun_log.setLevel(logging.INFO)
        assert not held.filter(record("error connecting in %r: %s"))
        assert not held.filter(record("discarding closed connection: %s"))
        assert held.filter(record("reconnection attempt in pool %r failed after %s sec"))
        assert held.filter(record("discarding closed connection: %s", logging.ERROR))
        jobrun_log.setLevel(logging.DEBUG)
        assert held.filter(record("error connecting in %r: %s"))
    finally:
        jobrun_log.setLevel(before)
    hold_driver_churn()
    hold_driver_churn()
    filters = logging.getLogger("psycopg.pool").filters
    assert sum(isinstance(f, DriverChurnHeld) for f in filters) == 1
