"""What only the sync store has: sync caller connections and SyncProducer's own pool.

The store's contract (enqueue, batches, idempotency, payload checks, the
operators, notifications) runs against the generated sync store in
``test_store_sync.py``, generated from ``test_store.py``; here are transactional enqueue on a sync
``psycopg.Connection`` and the SyncProducer lifecycle.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jobrun.domain import Job, JobState, NewJob
from jobrun.errors import (
    ConfigurationError,
    DatabaseUnavailable,
    IdempotencyConflict,
    JobNotFound,
)
from jobrun.postgres import SyncProducer, open_pool, open_sync_pool
from jobrun.postgres.store import Store
from jobrun.sqlc import jobs as job_queries
from jobrun.testing import eventually_sync


@pytest.fixture
def producer(db_url: str) -> Iterator[SyncProducer]:
    with SyncProducer(db_url) as made:
        yield made


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


def test_a_caller_pool_without_autocommit_keeps_every_write(db_url: str) -> None:
    # psycopg_pool's default connections open a transaction on their first
    # statement; the store must commit what its single statements wrote, not
    # hand the connection back mid-transaction for the pool to roll back.
    pool: ConnectionPool[Any] = ConnectionPool(db_url, min_size=1, max_size=1, open=True)
    try:
        producer = SyncProducer(pool)
        job = producer.enqueue(NewJob(type="t", queue="held"))
        producer.pause_queue("held", actor="test")
        with psycopg.connect(db_url) as other:
            assert other.execute(
                "SELECT count(*) FROM jobs WHERE id = %s", (job.id,)
            ).fetchone() == (1,)
            paused = other.execute("SELECT paused FROM queues WHERE name = 'held'").fetchone()
        assert paused == (True,)
    finally:
        pool.close()


def test_one_producer_shared_by_many_threads_stores_every_job_once(db_url: str) -> None:
    # A threaded web server shares one SyncProducer across its request threads.
    # The switch interval makes the threads interleave inside enqueue (job ids
    # included: unlocked, the id generator gave two threads one id).
    threads_n, each = 8, 150
    made: list[UUID] = []
    failures: list[BaseException] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        with SyncProducer(db_url, max_pool_size=3) as producer:

            def produce() -> None:
                try:
                    mine = [
                        producer.enqueue(NewJob(type="t", queue="threads")).id for _ in range(each)
                    ]
                    batch = producer.enqueue_batch(
                        [NewJob(type="t", queue="threads") for _ in range(each)]
                    )
                    mine += [job.id for job in batch if isinstance(job, Job)]
                    mine += producer.enqueue_many("t", [{}] * each, queue="threads")
                    made.extend(mine)
                except BaseException as exc:  # reported below, with the thread's count
                    failures.append(exc)

            workers = [threading.Thread(target=produce) for _ in range(threads_n)]
            for thread in workers:
                thread.start()
            for thread in workers:
                thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(made) == len(set(made)) == threads_n * each * 3
    with psycopg.connect(db_url) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM jobs WHERE queue = 'threads'")}
    assert stored == set(made)


def _enqueue_in_a_fork(producer: SyncProducer, index: int, conn: Any) -> None:
    try:
        ids = [producer.enqueue(NewJob(type="t", queue="forked", payload={"child": index})).id]
        batch = producer.enqueue_batch([NewJob(type="t", queue="forked") for _ in range(10)])
        ids += [job.id for job in batch if isinstance(job, Job)]
        ids += producer.enqueue_many("t", [{"child": index}] * 40, queue="forked")
        ids += [producer.enqueue(NewJob(type="t", queue="forked")).id for _ in range(49)]
        # Closing in the child must not end the parent's sessions.
        producer.close()
        conn.send(("ok", [str(i) for i in ids]))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))


def _close_unused_in_a_fork(producer: SyncProducer, conn: Any) -> None:
    producer.close()
    conn.send("closed")


def test_a_producer_opened_before_a_fork_serves_every_process(db_url: str) -> None:
    # gunicorn --preload: the app (and its producer) is built in the master,
    # and every worker is a fork of it. Shared, the pool's sockets carried
    # several processes' statements at once, and the processes hung.
    fork = multiprocessing.get_context("fork")
    with SyncProducer(db_url, max_pool_size=2) as producer:
        parent_first = producer.enqueue(NewJob(type="t", queue="forked"))
        pipes = [fork.Pipe() for _ in range(3)]
        children = [
            fork.Process(target=_enqueue_in_a_fork, args=(producer, i, theirs))
            for i, (_, theirs) in enumerate(pipes)
        ]
        idle_ours, idle_theirs = fork.Pipe()
        children.append(fork.Process(target=_close_unused_in_a_fork, args=(producer, idle_theirs)))
        for child in children:
            child.start()
        mine = [producer.enqueue(NewJob(type="t", queue="forked")).id for _ in range(100)]
        results = [ours.recv() for ours, _ in pipes]
        assert idle_ours.recv() == "closed"
        for child in children:
            child.join(30)
            assert child.exitcode == 0
        assert [status for status, _ in results] == ["ok"] * 3, results
        # The parent's own connections survived the children closing theirs.
        mine.append(producer.enqueue(NewJob(type="t", queue="forked")).id)
    made = {parent_first.id, *mine} | {UUID(i) for _, ids in results for i in ids}
    assert len(made) == 1 + 101 + 3 * 100
    with psycopg.connect(db_url) as conn:
        stored = {row[0] for row in conn.execute("SELECT id FROM jobs WHERE queue = 'forked'")}
    assert stored == made


def test_a_pool_passed_in_is_refused_in_a_fork_and_left_to_the_parent(db_url: str) -> None:
    fork = multiprocessing.get_context("fork")
    pool = open_sync_pool(db_url, max_size=1)
    try:
        producer = SyncProducer(pool)
        producer.enqueue(NewJob(type="t", queue="forked"))
        ours, theirs = fork.Pipe()
        child = fork.Process(target=_enqueue_in_a_fork, args=(producer, 0, theirs))
        child.start()
        status, message = ours.recv()
        child.join(30)
        assert status == "error"
        assert message.startswith("UsageError: ") and "cannot cross a fork" in message
        assert str(os.getpid()) in message, "the message names the process that opened it"
        producer.enqueue(NewJob(type="t", queue="forked"))
    finally:
        pool.close()
    assert _count(db_url) == 2


def test_context_manager_closes_its_own_pool(db_url: str) -> None:
    with SyncProducer(db_url) as producer:
        producer.depth()
    assert producer.pool.closed


def test_unreachable_database_is_a_clear_error() -> None:
    url = "postgresql://postgres:secret@127.0.0.1:1/nowhere"
    with pytest.raises(DatabaseUnavailable, match=r"127\.0\.0\.1:1\b") as caught:
        SyncProducer(url, connect_timeout=timedelta(seconds=1))
    assert "secret" not in str(caught.value)


def test_bad_arguments() -> None:
    with pytest.raises(ConfigurationError):
        SyncProducer(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        SyncProducer("postgresql://x", notify_channel="")
    with pytest.raises(ConfigurationError):
        SyncProducer("postgresql://x", max_payload_bytes=0)


def test_open_sync_pool_connections_match_the_async_pool(db_url: str) -> None:
    # Autocommit and a UTC session, as open_pool's: the generated store relies on both.
    with open_sync_pool(db_url, max_size=2) as pool:
        assert pool.max_size == 2
        with pool.connection() as conn:
            assert conn.autocommit
            assert conn.execute("SHOW timezone").fetchone() == ("UTC",)


def test_open_sync_pool_refuses_bad_arguments_without_the_password() -> None:
    with pytest.raises(ConfigurationError, match="max_size"):
        open_sync_pool("postgresql://x", max_size=0)
    with pytest.raises(ConfigurationError) as caught:
        open_sync_pool("postgresql://u:pa55word@host:notaport/db?bogus_option=1")
    assert "pa55word" not in str(caught.value)


# -- a connection the server ended ----------------------------------------------


def test_a_pooled_connection_the_server_ended_is_replaced_before_the_next_enqueue(
    db_url: str,
) -> None:
    # The pool checks a borrowed connection only when its socket has
    # something to read; a server that ends a session writes its error and
    # closes, so the next enqueue gets a new connection instead of failing.
    with SyncProducer(db_url, max_pool_size=1) as producer:
        first = producer.enqueue(NewJob(type="t"))
        with producer.pool.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid = row[0]
        with psycopg.connect(db_url, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
            # The backend is gone once it left pg_stat_activity.
            eventually_sync(
                lambda: (
                    admin.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                    ).fetchone()
                    == (0,)
                ),
                what="the terminated backend exiting",
            )
        second = producer.enqueue(NewJob(type="t", payload={"after": True}))
        assert producer.get(second.id).payload == {"after": True}
        assert producer.get(first.id).state is JobState.QUEUED
        with producer.pool.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None and row[0] != pid
