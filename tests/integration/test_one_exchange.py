"""The one-exchange statement path: single statements without psycopg's cursor, on real PostgreSQL.

Each test runs on a pool of one connection, so the session the store prepared
its statement in is the session the test then inspects or disturbs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jobrun.domain import Job, JobState, NewJob, Outcome, OutcomeKind
from jobrun.errors import DatabaseUnavailable, SchemaMissing
from jobrun.postgres import Pool, SyncPool, open_pool, open_sync_pool
from jobrun.postgres.store import Store
from jobrun.postgres.store_sync import SyncStore
from jobrun.testing import eventually, eventually_sync

ONE_EXCHANGE_STATEMENTS = (
    "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'jobrun_call_%'"
)


@pytest.fixture
async def one(db_url: str) -> AsyncIterator[Pool]:
    opened = await open_pool(db_url, worker_concurrency=1)
    await opened.resize(min_size=1, max_size=1)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def sync_one(db_url: str) -> Iterator[SyncPool]:
    opened = open_sync_pool(db_url, max_size=1)
    try:
        yield opened
    finally:
        opened.close()


async def session_scalar(pool: Pool, query: str) -> object:
    async with pool.connection() as conn:
        row = await (await conn.execute(query)).fetchone()
    assert row is not None
    return row[0]


async def test_the_statement_is_prepared_once_per_session_and_per_parameter_types(
    one: Pool,
) -> None:
    store = Store(one)
    now = await store.now()
    plain = [await store.enqueue(NewJob(type="t", payload={"i": i})) for i in range(3)]
    # Two statements: the first enqueue looks for an idle worker's offer,
    # finds none, and the next two skip the look (jobrun.postgres.offer_hints).
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 2
    # A run_at is sent as a timestamptz where the calls above sent an
    # untyped NULL: another statement, as psycopg would prepare.
    at = now + timedelta(days=1)
    timed = await store.enqueue(NewJob(type="t", run_at=at, priority=-5))
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 3
    again = await store.enqueue(NewJob(type="t", run_at=at + timedelta(seconds=1)))
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 3
    stored = await store.get(timed.id)
    assert (stored.run_at, stored.priority, stored.state) == (at, -5, JobState.QUEUED)
    assert (await store.get(again.id)).run_at == at + timedelta(seconds=1)
    assert [(await store.get(j.id)).payload for j in plain] == [{"i": i} for i in range(3)]


async def test_a_session_that_lost_its_statements_prepares_them_again(one: Pool) -> None:
    store = Store(one)
    first = await store.enqueue(NewJob(type="t"))
    async with one.connection() as conn:
        await conn.execute("DEALLOCATE ALL")
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 0
    second = await store.enqueue(NewJob(type="t", payload={"n": 2}))
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 1
    assert (await store.get(first.id)).state is JobState.QUEUED
    assert (await store.get(second.id)).payload == {"n": 2}


async def test_claims_and_outcomes_go_in_one_exchange_with_binary_parameters(
    one: Pool,
) -> None:
    # The claim's and the outcomes' queries send arrays as %(name)b: the one-exchange
    # path must dump them in binary, as psycopg's cursor does.
    store = Store(one)
    jobs = [await store.enqueue(NewJob(type="t", queue=q, priority=p)) for q, p in
            [("a", 0), ("b", -1), ("a", 5)]]  # fmt: skip
    claimed = await store.claim(["a", "b"], "w1", 10, timedelta(seconds=30))
    assert [j.id for j in claimed] == [jobs[1].id, jobs[0].id, jobs[2].id]
    # The enqueue that looks for an offer (the first to "a" and to "b"), the one
    # that skips the look (the second to "a"), the claim.
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 3
    outcomes = [Outcome(job=j, kind=OutcomeKind.COMPLETE) for j in claimed[:2]]
    outcomes.append(Outcome(job=claimed[2], kind=OutcomeKind.FAIL, detail="boom"))
    recorded = await store.record_outcomes("w1", outcomes)
    assert await session_scalar(one, ONE_EXCHANGE_STATEMENTS) == 4
    states = [r.state if isinstance(r, Job) else r for r in recorded]
    assert states == [JobState.SUCCEEDED, JobState.SUCCEEDED, JobState.QUEUED]
    assert (await store.get(jobs[2].id)).last_error == "boom"
    # A session that lost them prepares them again within the call.
    await store.enqueue(NewJob(type="t", queue="a"))
    async with one.connection() as conn:
        await conn.execute("DEALLOCATE ALL")
    (again,) = await store.claim(["a"], "w2", 10, timedelta(seconds=30))
    assert again.queue == "a" and again.lease_owner == "w2"
    (done,) = await store.record_outcomes("w2", [Outcome(job=again, kind=OutcomeKind.COMPLETE)])
    assert isinstance(done, Job) and done.state is JobState.SUCCEEDED


async def test_behind_pgbouncer_nothing_is_prepared(db_url: str) -> None:
    pool = await open_pool(db_url, worker_concurrency=1, pgbouncer=True)
    await pool.resize(min_size=1, max_size=1)
    try:
        store = Store(pool)
        jobs = [await store.enqueue(NewJob(type="t", payload={"i": i})) for i in range(7)]
        assert await session_scalar(pool, "SELECT count(*) FROM pg_prepared_statements") == 0
        assert [(await store.get(j.id)).payload for j in jobs] == [{"i": i} for i in range(7)]
    finally:
        await pool.close()


async def test_an_enqueue_cancelled_mid_statement_costs_the_pool_nothing(
    one: Pool, db_url: str
) -> None:
    store = Store(one)
    await store.enqueue(NewJob(type="t"))
    with psycopg.connect(db_url) as blocker:
        blocker.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
        task = asyncio.create_task(store.enqueue(NewJob(type="t", payload={"lost": True})))
        await eventually(
            lambda: (
                blocker.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                ).fetchone()
                == (1,)
            ),
            within=10,
            what="the enqueue waiting on the lock",
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        blocker.rollback()
    # The interrupted connection was discarded; the pool opens another.
    after = await asyncio.wait_for(store.enqueue(NewJob(type="t", payload={"n": 3})), 10)
    assert (await store.get(after.id)).payload == {"n": 3}


async def test_a_server_error_on_the_one_exchange_path_is_mapped_as_before(db_url: str) -> None:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("ALTER TABLE jobs RENAME TO jobs_elsewhere")
    pool = await open_pool(db_url, worker_concurrency=1)
    try:
        with pytest.raises(SchemaMissing):
            await Store(pool).enqueue(NewJob(type="t"))
    finally:
        await pool.close()


def test_the_sync_store_prepares_once_and_again_after_losing_it(sync_one: SyncPool) -> None:
    store = SyncStore(sync_one)
    jobs = [store.enqueue(NewJob(type="t", payload={"i": i})) for i in range(3)]
    with sync_one.connection() as conn:
        # The first enqueue looks for an offer; the next two skip the look.
        assert conn.execute(ONE_EXCHANGE_STATEMENTS).fetchone() == (2,)
        conn.execute("DEALLOCATE ALL")
    jobs.append(store.enqueue(NewJob(type="t", payload={"i": 3}, delay=timedelta(hours=1))))
    with sync_one.connection() as conn:
        assert conn.execute(ONE_EXCHANGE_STATEMENTS).fetchone() == (1,)
    assert [store.get(j.id).payload for j in jobs] == [{"i": i} for i in range(4)]
    assert jobs[-1].run_at - jobs[0].run_at > timedelta(minutes=59)


async def test_a_connection_the_server_ended_fails_as_unavailable_then_the_pool_recovers(
    one: Pool, db_url: str
) -> None:
    # The async pool checks nothing on borrow (it would cost every claim a
    # round trip): the enqueue that meets the dead connection fails as the
    # database being unavailable, as it did through psycopg's cursor, and the
    # pool replaces the connection for the next one.
    store = Store(one)
    await store.enqueue(NewJob(type="t"))
    pid = await session_scalar(one, "SELECT pg_backend_pid()")
    with psycopg.connect(db_url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
        await eventually(
            lambda: (
                admin.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
                ).fetchone()
                == (0,)
            ),
            what="the terminated backend exiting",
        )
    with pytest.raises(DatabaseUnavailable):
        await store.enqueue(NewJob(type="t", payload={"lost": True}))
    after = await asyncio.wait_for(store.enqueue(NewJob(type="t", payload={"n": 2})), 10)
    assert (await store.get(after.id)).payload == {"n": 2}


def test_a_sync_connection_the_server_ended_fails_as_unavailable(db_url: str) -> None:
    # libpq's blocking call reports the lost connection as a result without
    # a SQLSTATE; it must still surface as DatabaseUnavailable. A pool without
    # jobrun's borrow check, so the dead connection is the one used.
    with ConnectionPool(
        db_url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=True
    ) as bare:
        store = SyncStore(bare)
        store.enqueue(NewJob(type="t"))
        with bare.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        with psycopg.connect(db_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
            eventually_sync(
                lambda: (
                    admin.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (row[0],)
                    ).fetchone()
                    == (0,)
                ),
                what="the terminated backend exiting",
            )
        with pytest.raises(DatabaseUnavailable):
            store.enqueue(NewJob(type="t", payload={"lost": True}))
        after = store.enqueue(NewJob(type="t", payload={"n": 2}))
        assert store.get(after.id).payload == {"n": 2}
