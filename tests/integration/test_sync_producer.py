"""SyncProducer on a real database: every method, idempotency, transactional enqueue.

Jobs are claimed and failed through the generated sync queries where a test
needs a leased or dead job: the producer itself has no worker half.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from psycopg_pool import ConnectionPool
from pydantic import BaseModel, Field

from jobrun.errors import (
    ConfigurationError,
    DatabaseUnavailable,
    IdempotencyConflict,
    InvalidJob,
    InvalidTransition,
    JobNotFound,
    PayloadTooLarge,
)
from jobrun.job import Job, JobFilter, JobState, NewJob
from jobrun.postgres import SyncProducer, open_pool
from jobrun.postgres.store import Store
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import system as system_queries


@pytest.fixture
def producer(db_url: str) -> Iterator[SyncProducer]:
    with SyncProducer(db_url) as made:
        yield made


def _claim(db_url: str, owner: str = "w1", queue: str = "default") -> list[Job]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = job_queries.Querier(conn).job_claim(
            params=job_queries.JobClaimParams(
                queues=[queue],
                owner=owner,
                max_jobs=100,
                lease=timedelta(minutes=5),
                now=None,
                record_events=True,
            )
        )
    return [producer_job(r) for r in rows]


def producer_job(row: Any) -> Job:
    from jobrun.postgres.convert import job_from_row

    return job_from_row(row)


def _fail(db_url: str, job: Job, owner: str = "w1") -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        now = system_queries.Querier(conn).database_now()
        assert now is not None
        row = job_queries.Querier(conn).job_fail(
            params=job_queries.JobFailParams(
                id=job.id, attempt=job.attempts, owner=owner, error="boom", retry_at=now, now=None
            )
        )
        assert row is not None


def _count(db_url: str, table: str = "jobs") -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def listener(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    conn = psycopg.connect(db_url, autocommit=True)
    conn.execute("LISTEN jobrun")
    try:
        yield conn
    finally:
        conn.close()


def _notified(conn: psycopg.Connection[Any], timeout: float = 0.5) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=timeout)]


# -- enqueue --------------------------------------------------------------------


def test_enqueue_stores_the_job_and_get_returns_it(producer: SyncProducer) -> None:
    new = NewJob(type="email", payload={"to": "a@example.com"}, queue="mail", priority=3)
    job = producer.enqueue(new)
    assert job.id == new.id
    assert job.state is JobState.QUEUED
    assert job.attempts == 0
    assert job.payload == {"to": "a@example.com"}
    assert job.run_at.utcoffset() == timedelta(0)
    assert producer.get(new.id) == job


def test_enqueue_notifies_the_queue_on_commit(
    producer: SyncProducer, listener: psycopg.Connection[Any]
) -> None:
    producer.enqueue(NewJob(type="t", queue="q1"))
    assert _notified(listener) == ["q1"]


def test_notify_channel_is_configurable(db_url: str, listener: psycopg.Connection[Any]) -> None:
    listener.execute("LISTEN other")
    with SyncProducer(db_url, notify_channel="other") as producer:
        producer.enqueue(NewJob(type="t", queue="q2"))
    got = list(listener.notifies(timeout=0.5))
    assert [(n.channel, n.payload) for n in got] == [("other", "q2")]


def test_delay_is_measured_on_the_database_clock(producer: SyncProducer, db_url: str) -> None:
    job = producer.enqueue(NewJob(type="t", delay=timedelta(hours=1)))
    assert job.run_at - job.created_at == timedelta(hours=1)
    assert _claim(db_url) == []


def test_replay_returns_the_stored_job(producer: SyncProducer) -> None:
    first = producer.enqueue(NewJob(type="t", payload={"a": 1, "b": [1, 2]}, idempotency_key="k"))
    # Same body with keys in another order: a replay, compared as JSON.
    again = NewJob(type="t", payload={"b": [1, 2], "a": 1}, idempotency_key="k")
    replay = producer.enqueue(again)
    assert replay.id == first.id != again.id
    assert replay == producer.get(first.id)
    assert producer.list_jobs().jobs == [first]


def test_conflicting_body_raises_and_changes_nothing(producer: SyncProducer) -> None:
    first = producer.enqueue(NewJob(type="t", payload={"a": 1}, idempotency_key="k"))
    with pytest.raises(IdempotencyConflict) as caught:
        producer.enqueue(NewJob(type="t", payload={"a": 2}, idempotency_key="k"))
    assert caught.value.existing_id == first.id
    with pytest.raises(IdempotencyConflict):
        producer.enqueue(NewJob(type="t", payload={"a": 1}, priority=5, idempotency_key="k"))
    assert producer.list_jobs().jobs == [first]
    # The same key in another queue is another job.
    other = producer.enqueue(NewJob(type="t", payload={"a": 2}, queue="q", idempotency_key="k"))
    assert other.id != first.id


def test_replay_does_not_notify(producer: SyncProducer, listener: psycopg.Connection[Any]) -> None:
    producer.enqueue(NewJob(type="t", idempotency_key="k"))
    assert _notified(listener) == ["default"]
    producer.enqueue(NewJob(type="t", idempotency_key="k"))
    assert _notified(listener) == []


# -- batch ----------------------------------------------------------------------


def test_enqueue_batch_mixes_plain_keyed_replays_and_conflicts(
    producer: SyncProducer, db_url: str, listener: psycopg.Connection[Any]
) -> None:
    existing = producer.enqueue(NewJob(type="t", payload={"v": 1}, idempotency_key="old"))
    _notified(listener)
    batch = [
        NewJob(type="t", payload={"n": 0}, queue="a"),
        NewJob(type="t", payload={"v": 1}, idempotency_key="old"),  # replay
        NewJob(type="t", payload={"v": 2}, idempotency_key="old"),  # conflict
        NewJob(type="t", payload={"n": 3}, queue="b", idempotency_key="new"),
        NewJob(type="t", payload={"n": 4}, queue="a"),
    ]
    results = producer.enqueue_batch(batch)
    assert len(results) == 5
    first, replay, conflict, keyed, last = results
    assert isinstance(first, Job) and first.id == batch[0].id
    assert replay == existing
    assert isinstance(conflict, IdempotencyConflict) and conflict.existing_id == existing.id
    assert isinstance(keyed, Job) and keyed.id == batch[3].id
    assert isinstance(last, Job) and last.id == batch[4].id
    # What the batch reports is what was stored.
    for made in (first, keyed, last):
        assert producer.get(made.id) == made
    assert _count(db_url) == 4
    assert sorted(_notified(listener)) == ["a", "b"]
    with psycopg.connect(db_url) as conn:
        kinds = conn.execute(
            "SELECT job_id, kind FROM job_events WHERE job_id = ANY(%s)",
            [[first.id, keyed.id, last.id]],
        ).fetchall()
    assert sorted(k for _, k in kinds) == ["enqueued"] * 3


def test_enqueue_batch_of_nothing(producer: SyncProducer) -> None:
    assert producer.enqueue_batch([]) == []


def test_batch_with_one_bad_payload_writes_nothing(producer: SyncProducer, db_url: str) -> None:
    with pytest.raises(InvalidJob, match="bad"):
        producer.enqueue_batch([NewJob(type="ok"), NewJob(type="bad", payload={"x": float("nan")})])
    assert _count(db_url) == 0


# -- transactional enqueue ------------------------------------------------------


@pytest.fixture
def orders(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
    return db_url


def test_enqueue_in_a_committed_transaction(
    producer: SyncProducer, orders: str, listener: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(orders) as conn:
        conn.execute("INSERT INTO orders VALUES (1)")
        job = producer.enqueue(NewJob(type="ship", payload={"order": 1}), conn=conn)
        batch = producer.enqueue_batch([NewJob(type="bill")], conn=conn)
        # Not visible outside the caller's transaction yet, and no one woke up.
        with pytest.raises(JobNotFound):
            producer.get(job.id)
        assert _notified(listener, 0.2) == []
        conn.commit()
    assert producer.get(job.id).state is JobState.QUEUED
    assert isinstance(batch[0], Job) and producer.get(batch[0].id).type == "bill"
    assert _count(orders, "orders") == 1
    # PostgreSQL folds identical notifications of one transaction into one.
    assert _notified(listener) == ["default"]


def test_enqueue_in_a_rolled_back_transaction_leaves_nothing(
    producer: SyncProducer, orders: str, listener: psycopg.Connection[Any]
) -> None:
    with psycopg.connect(orders) as conn:
        conn.execute("INSERT INTO orders VALUES (1)")
        job = producer.enqueue(NewJob(type="ship"), conn=conn)
        producer.enqueue_batch(
            [NewJob(type="bill"), NewJob(type="x", idempotency_key="k")], conn=conn
        )
        conn.rollback()
    with pytest.raises(JobNotFound):
        producer.get(job.id)
    assert _count(orders) == 0
    assert _count(orders, "job_events") == 0
    assert _count(orders, "orders") == 0
    assert _notified(listener, 1.0) == []


def test_enqueue_first_in_a_fresh_transaction_is_rolled_back_with_it(
    producer: SyncProducer, orders: str, listener: psycopg.Connection[Any]
) -> None:
    # The job is the caller's first statement: it must begin the caller's
    # transaction, not commit one of its own.
    with psycopg.connect(orders) as conn:
        job = producer.enqueue(NewJob(type="ship"), conn=conn)
        conn.execute("INSERT INTO orders VALUES (1)")
        conn.rollback()
        batch = producer.enqueue_batch([NewJob(type="bill")], conn=conn)
        conn.rollback()
    with pytest.raises(JobNotFound):
        producer.get(job.id)
    assert isinstance(batch[0], Job)
    with pytest.raises(JobNotFound):
        producer.get(batch[0].id)
    assert _count(orders) == 0
    assert _notified(listener, 1.0) == []


def test_enqueue_on_an_autocommit_connection_commits_on_its_own(
    producer: SyncProducer, db_url: str
) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        job = producer.enqueue(NewJob(type="t"), conn=conn)
    assert producer.get(job.id) == job


def test_conflict_in_a_caller_transaction_leaves_it_usable(
    producer: SyncProducer, orders: str
) -> None:
    producer.enqueue(NewJob(type="t", payload=1, idempotency_key="k"))
    with psycopg.connect(orders) as conn:
        conn.execute("INSERT INTO orders VALUES (1)")
        with pytest.raises(IdempotencyConflict):
            producer.enqueue(NewJob(type="t", payload=2, idempotency_key="k"), conn=conn)
        conn.execute("INSERT INTO orders VALUES (2)")
        conn.commit()
    assert _count(orders, "orders") == 2
    assert _count(orders) == 1


def test_conn_must_be_a_sync_connection(producer: SyncProducer, db_url: str) -> None:
    async def with_async_conn() -> None:
        async with await psycopg.AsyncConnection.connect(db_url) as conn:
            with pytest.raises(ConfigurationError, match=r"sync psycopg\.Connection"):
                producer.enqueue(NewJob(type="t"), conn=conn)  # type: ignore[arg-type]

    asyncio.run(with_async_conn())
    assert _count(db_url) == 0


def test_async_store_refuses_a_sync_connection(db_url: str) -> None:
    async def run() -> None:
        pool = await open_pool(db_url, worker_concurrency=1)
        try:
            with (
                psycopg.connect(db_url) as conn,
                pytest.raises(ConfigurationError, match="SyncProducer"),
            ):
                await Store(pool).enqueue(NewJob(type="t"), conn=conn)  # type: ignore[arg-type]
        finally:
            await pool.close()

    asyncio.run(run())


# -- payload validation ---------------------------------------------------------


class Invoice(BaseModel):
    customer: str
    amount: int = Field(ge=0)
    currency: str = "EUR"


def test_typed_payload_is_stored_normalised(db_url: str) -> None:
    with SyncProducer(db_url, payload_models={"invoice": Invoice}) as producer:
        job = producer.enqueue(NewJob(type="invoice", payload={"customer": "c1", "amount": "12"}))
        assert job.payload == {"customer": "c1", "amount": 12, "currency": "EUR"}
        assert producer.get(job.id).payload == job.payload
        # Other types are not checked.
        producer.enqueue(NewJob(type="other", payload={"amount": "x"}))
        # A replay compares the normalised payloads.
        keyed = NewJob(type="invoice", payload={"customer": "c", "amount": 1}, idempotency_key="i")
        first = producer.enqueue(keyed)
        again = producer.enqueue(
            NewJob(
                type="invoice",
                payload={"customer": "c", "amount": "1", "currency": "EUR"},
                idempotency_key="i",
            )
        )
        assert again == first


def test_invalid_typed_payload_names_the_field_and_writes_nothing(db_url: str) -> None:
    with SyncProducer(db_url, payload_models={"invoice": Invoice}) as producer:
        with pytest.raises(InvalidJob, match="amount") as caught:
            producer.enqueue(NewJob(type="invoice", payload={"customer": "c1", "amount": -3}))
        assert "Invoice" in str(caught.value)
        with pytest.raises(InvalidJob, match="customer"):
            producer.enqueue_batch(
                [NewJob(type="other"), NewJob(type="invoice", payload={"amount": 1})]
            )
    assert _count(db_url) == 0


def test_non_json_payload_is_refused(producer: SyncProducer, db_url: str) -> None:
    with pytest.raises(InvalidJob, match="not valid JSON"):
        producer.enqueue(NewJob(type="t", payload={"x": float("inf")}))
    # A payload that bypassed NewJob's own validation is still caught.
    sneaky = NewJob.model_construct(
        type="t",
        payload={"s": {1, 2}},
        queue="default",
        priority=0,
        max_attempts=3,
        backoff=NewJob(type="t").backoff,
        run_at=None,
        delay=None,
        idempotency_key=None,
        id=uuid4(),
    )
    with pytest.raises(InvalidJob, match="'t' is not valid JSON"):
        producer.enqueue(sneaky)
    with pytest.raises(InvalidJob, match="NUL"):
        producer.enqueue(NewJob(type="t", payload="a\x00b"))
    assert _count(db_url) == 0


def test_oversize_payload_is_refused(db_url: str) -> None:
    with SyncProducer(db_url, max_payload_bytes=1000) as producer:
        producer.enqueue(NewJob(type="t", payload="x" * 900))
        with pytest.raises(PayloadTooLarge, match="over the 1000-byte limit"):
            producer.enqueue(NewJob(type="big", payload="x" * 1000))
        with pytest.raises(PayloadTooLarge, match="'big'"):
            producer.enqueue_batch([NewJob(type="t"), NewJob(type="big", payload=["é" * 600])])
    assert _count(db_url) == 1


# -- operators ------------------------------------------------------------------


def test_get_unknown_job(producer: SyncProducer) -> None:
    with pytest.raises(JobNotFound):
        producer.get(uuid4())


def test_list_jobs_filters_and_pages(producer: SyncProducer, db_url: str) -> None:
    made = [producer.enqueue(NewJob(type="a" if i % 2 else "b", queue="q")) for i in range(5)]
    producer.enqueue(NewJob(type="a", queue="elsewhere"))
    page = producer.list_jobs(JobFilter(queue="q"), limit=2)
    assert [j.id for j in page.jobs] == [made[4].id, made[3].id]
    assert page.next_cursor == made[3].id
    page2 = producer.list_jobs(JobFilter(queue="q"), limit=2, cursor=page.next_cursor)
    page3 = producer.list_jobs(JobFilter(queue="q"), limit=2, cursor=page2.next_cursor)
    assert [j.id for j in page2.jobs + page3.jobs] == [made[2].id, made[1].id, made[0].id]
    assert page3.next_cursor is None
    assert {j.id for j in producer.list_jobs(JobFilter(queue="q", type="a")).jobs} == {
        made[1].id,
        made[3].id,
    }
    _claim(db_url, queue="elsewhere")
    leased = producer.list_jobs(JobFilter(state=JobState.LEASED)).jobs
    assert [j.queue for j in leased] == ["elsewhere"]
    with pytest.raises(ConfigurationError):
        producer.list_jobs(limit=0)


def test_cancel_queued_leased_and_finished(producer: SyncProducer, db_url: str) -> None:
    queued = producer.enqueue(NewJob(type="t", queue="q"))
    cancelled = producer.cancel(queued.id)
    assert cancelled.state is JobState.CANCELLED and cancelled.finished_at is not None

    leased = producer.enqueue(NewJob(type="t"))
    _claim(db_url)
    flagged = producer.cancel(leased.id)
    assert flagged.state is JobState.LEASED and flagged.cancel_requested
    assert producer.cancel(leased.id) == flagged  # asking twice changes nothing

    with pytest.raises(InvalidTransition) as caught:
        producer.cancel(queued.id)
    assert caught.value.state == "cancelled"
    with pytest.raises(JobNotFound):
        producer.cancel(uuid4())


def test_retry_dead_and_cancelled_only(
    producer: SyncProducer, db_url: str, listener: psycopg.Connection[Any]
) -> None:
    job = producer.enqueue(NewJob(type="t", max_attempts=1))
    (claimed,) = _claim(db_url)
    _fail(db_url, claimed)
    assert producer.get(job.id).state is JobState.DEAD
    _notified(listener)
    retried = producer.retry(job.id)
    assert retried.state is JobState.QUEUED
    assert retried.max_attempts == 1 and retried.attempts == 0
    assert _notified(listener) == ["default"]
    with pytest.raises(InvalidTransition, match="retry"):
        producer.retry(job.id)
    producer.cancel(job.id)
    assert producer.retry(job.id).state is JobState.QUEUED
    with pytest.raises(JobNotFound):
        producer.retry(uuid4())


def test_depth_counts_per_queue_and_state(producer: SyncProducer, db_url: str) -> None:
    assert producer.depth() == []
    for queue in ("a", "a", "b"):
        producer.enqueue(NewJob(type="t", queue=queue))
    _claim(db_url, queue="b")
    depth = {(d.queue, d.state): d.count for d in producer.depth()}
    assert depth == {("a", JobState.QUEUED): 2, ("b", JobState.LEASED): 1}


# -- lifecycle ------------------------------------------------------------------


def test_given_pool_is_used_and_left_open(db_url: str) -> None:
    pool: ConnectionPool[Any] = ConnectionPool(db_url, min_size=1, max_size=2, open=True)
    try:
        producer = SyncProducer(pool)
        assert producer.pool is pool
        job = producer.enqueue(NewJob(type="t"))
        producer.close()
        assert not pool.closed
        with pool.connection() as conn:
            assert job_queries.Querier(conn).job_get(id=job.id) is not None
    finally:
        pool.close()


def test_context_manager_closes_its_own_pool(db_url: str) -> None:
    with SyncProducer(db_url) as producer:
        producer.depth()
    assert producer.pool.closed


def test_unreachable_database_is_a_clear_error() -> None:
    url = "postgresql://postgres:secret@127.0.0.1:1/nowhere"
    with pytest.raises(DatabaseUnavailable, match=r"127\.0\.0\.1:1\b") as caught:
        SyncProducer(url, connect_timeout=1)
    assert "secret" not in str(caught.value)


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError):
        SyncProducer(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        SyncProducer("postgresql://x", notify_channel="")
