"""The batch paths' hand-encoded COPY rows against psycopg's own COPY of the same values.

``jobrun.postgres.copyrows`` writes PostgreSQL's binary COPY format itself
(the batch enqueue's per-job cost was mostly psycopg's per-field dumpers).
Each case here is inserted twice, once through the generated
``job_insert_copy`` (psycopg encodes every field) and once through the
encoder, and every stored column must come out the same: the boundaries of
each type included (smallint priorities at both ends, intervals with days,
times at the ends of Python's calendar, multibyte text, trace context).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from psycopg.types.json import Jsonb

from jobrun.domain import Backoff, BackoffKind
from jobrun.postgres.copyrows import JobCopyEncoder, copy_data
from jobrun.sqlc import jobs as job_queries

NOW = datetime(2026, 12, 1, 10, 30, 15, 123456, tzinfo=UTC)

CASES: list[dict[str, Any]] = [
    dict(queue="default", job_type="noop", payload="{}", priority=0, max_attempts=25,
         backoff=Backoff(), run_at=NOW, key=None),
    dict(queue="mail", job_type="mail.welcome", payload='{"to":"ada@example.com","n":[1,2.5]}',
         priority=-32768, max_attempts=1,
         backoff=Backoff(kind=BackoffKind.CONSTANT, base=timedelta(days=3, microseconds=1),
                         max=timedelta(days=3, microseconds=1)),
         run_at=datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), key="k-1"),
    dict(queue="ünïcødé ✓", job_type="тип.задачи", payload='{"text":"日本語 😀 \\\\ \\"q\\""}',
         priority=32767, max_attempts=2_147_483_647,
         backoff=Backoff(kind=BackoffKind.LINEAR, base=timedelta(microseconds=1),
                         max=timedelta(days=36500)),
         run_at=datetime(1, 1, 1, tzinfo=UTC), key="ключ"),
    dict(queue="q", job_type="t", payload='"just a string"', priority=7, max_attempts=3,
         backoff=Backoff(kind=BackoffKind.EXPONENTIAL, base=timedelta(seconds=2),
                         max=timedelta(hours=1)),
         run_at=datetime(2000, 1, 1, tzinfo=UTC) - timedelta(microseconds=1), key=None),
]  # fmt: skip

COLUMNS = (
    "queue, type, payload, priority, max_attempts, backoff_kind, backoff_base, backoff_max,"
    " run_at, idempotency_key, created_at, updated_at, meta, state, attempts"
)


def reference_row(job_id: Any, case: dict[str, Any], meta: dict[str, str] | None) -> Any:
    backoff = case["backoff"]
    values = (
        job_id, case["queue"], case["job_type"], Jsonb(case["payload"], dumps=lambda t: t),
        case["priority"], case["max_attempts"], backoff.kind.value, backoff.base, backoff.max,
        case["run_at"], case["key"], NOW, NOW,
    )  # fmt: skip
    if meta is None:
        return job_queries.JobInsertCopyParams(*values)
    return job_queries.JobInsertCopyTracedParams(*values, Jsonb(meta))


def fetch(conn: psycopg.Connection[Any], job_id: Any) -> tuple[Any, ...]:
    row = conn.execute(f"SELECT {COLUMNS} FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


@pytest.mark.parametrize("meta", [None, {"traceparent": "00-abc-def-01", "ключ": "значение"}])
def test_encoded_rows_store_what_psycopgs_copy_stores(
    db_url: str, meta: dict[str, str] | None
) -> None:
    pairs = [(uuid4(), uuid4(), case) for case in CASES]
    with psycopg.connect(db_url) as conn:
        queries = job_queries.Querier(conn)
        if meta is None:
            queries.job_insert_copy(rows=[reference_row(a, c, meta) for a, _, c in pairs])
        else:
            queries.job_insert_copy_traced(rows=[reference_row(a, c, meta) for a, _, c in pairs])
        stored = [fetch(conn, reference) for reference, _, _ in pairs]
        # Idempotency keys are unique per queue: the reference rows make way.
        conn.execute("DELETE FROM jobs")
        encoder = JobCopyEncoder(NOW, meta)
        rows = [
            encoder.row(b, c["queue"], c["job_type"], c["payload"], c["priority"],
                        c["max_attempts"], c["backoff"], c["run_at"], c["key"])
            for _, b, c in pairs
        ]  # fmt: skip
        with conn.cursor() as cur, cur.copy(encoder.statement) as copy:
            copy.write(copy_data(rows))
        for (_, encoded, case), expected in zip(pairs, stored, strict=True):
            got = fetch(conn, encoded)
            assert got == expected, case
            assert got[8] == case["run_at"]
            assert got[2] == conn.execute("SELECT %s::jsonb", (case["payload"],)).fetchone()[0]  # type: ignore[index]
