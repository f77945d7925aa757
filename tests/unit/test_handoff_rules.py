"""Which single enqueues may be handed off, decided before any database work.

A handed job travels whole in a notification, which PostgreSQL caps at 8000
bytes, so the store refuses the handoff (and takes the queue path) for a job
whose payload, type, queue and trace context pass HANDOFF_MAX_BYTES in UTF-8.
That is a first filter only: the statement measures the text it would send
(tests/integration/test_handoff.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobrun.domain import NewJob
from jobrun.postgres.preparing import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    HANDOFF_MAX_BYTES,
    handoff_allowed,
    prepare_jobs,
)


def prepared(job: NewJob) -> object:
    (item,) = prepare_jobs([job], {}, DEFAULT_MAX_PAYLOAD_BYTES)
    return item


def test_a_small_job_due_now_may_be_handed_off() -> None:
    assert handoff_allowed(prepared(NewJob(type="t", payload={"n": 1})), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "job",
    [
        NewJob(type="t", idempotency_key="k"),
        NewJob(type="t", delay=timedelta(seconds=1)),
        NewJob(type="t", run_at="2030-01-01T00:00:00Z"),
    ],
)
def test_keyed_delayed_or_scheduled_jobs_are_not(job: NewJob) -> None:
    assert not handoff_allowed(prepared(job), None)  # type: ignore[arg-type]


def test_the_limit_counts_utf8_bytes_not_characters() -> None:
    # 1,000 characters of three bytes each: under the limit in characters,
    # over it in bytes.
    item = prepared(NewJob(type="t", payload={"s": "€" * 1000}))
    assert not handoff_allowed(item, None)  # type: ignore[arg-type]
    assert handoff_allowed(prepared(NewJob(type="t", payload={"s": "€" * 990})), None)  # type: ignore[arg-type]


def test_the_trace_context_counts_in_bytes_too() -> None:
    # Non-ASCII text with a trace context that only fits when counted in
    # characters: the context's bytes must count on the byte path as well.
    item = prepared(NewJob(type="t", payload={"s": "€" * 500}))  # 509 chars, 1,509 bytes
    meta = {"traceparent": "x" * (HANDOFF_MAX_BYTES - 1400)}  # fits by characters only
    assert handoff_allowed(item, {"traceparent": "x" * 100})  # type: ignore[arg-type]
    assert not handoff_allowed(item, meta)  # type: ignore[arg-type]


def test_the_single_enqueue_statement_stays_within_psycopgs_parse_cache() -> None:
    # On a caller's connection (conn=) the statement (the queued one) goes
    # through a psycopg cursor, which caches its parsing of a query only up to
    # this length and parses a longer one again on every call (about 0.1 ms of
    # CPU). The handoff statement stays within it too.
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    from jobrun.sqlc.jobs import JOB_INSERT_NOTIFY, JOB_INSERT_QUEUED_NOTIFY

    assert len(JOB_INSERT_NOTIFY.encode()) <= MAX_CACHED_STATEMENT_LENGTH
    assert len(JOB_INSERT_QUEUED_NOTIFY.encode()) <= MAX_CACHED_STATEMENT_LENGTH
