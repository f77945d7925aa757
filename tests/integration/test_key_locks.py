"""Key locks under group commit: two workers' groups with crossing keys, on real connections.

Two owners complete a group each, concurrently, on their own pools. Each
group's callbacks update two shared rows in opposite orders, with a pause
between, which is the textbook deadlock. Declared as lock keys, the store
takes every key of a group in one global order before any callback runs, so
the groups serialise and each callback runs once. Without keys (the negative
control) PostgreSQL detects the deadlock and a group is rolled back, so its
callbacks run again: the test can fail, and shows what the keys prevent.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from jobrun.domain import Job, NewJob, Outcome, key_lock_id
from jobrun.postgres import lock_keys, open_pool
from jobrun.postgres.store import Store
from jobrun.registry import JobContext

LEASE = timedelta(seconds=60)


def bump(row: str, pause: bool) -> Any:
    async def commit(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("UPDATE shared SET n = n + 1 WHERE key = %s", (row,))
        if pause:
            await conn.execute("SELECT pg_sleep(0.5)")

    return commit


async def crossing_groups(db_url: str, *, declare: bool) -> list[Outcome]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE shared (key text PRIMARY KEY, n integer NOT NULL)")
        conn.execute("INSERT INTO shared VALUES ('x', 0), ('y', 0)")
    pools = [await open_pool(db_url, worker_concurrency=2) for _ in range(2)]
    try:
        stores = [Store(p) for p in pools]
        await stores[0].enqueue_batch([NewJob(type="t", payload={"i": i}) for i in range(4)])
        mine = await stores[0].claim(["default"], "a", 2, LEASE)
        theirs = await stores[1].claim(["default"], "b", 2, LEASE)

        def outcome(job: Job, row: str, pause: bool) -> Outcome:
            keys = (f"shared:{row}",) if declare else ()
            return Outcome(job=job, commit=bump(row, pause), lock_keys=keys)

        group_a = [outcome(mine[0], "x", True), outcome(mine[1], "y", False)]
        group_b = [outcome(theirs[0], "y", True), outcome(theirs[1], "x", False)]
        results = await asyncio.gather(
            stores[0].record_outcomes("a", group_a), stores[1].record_outcomes("b", group_b)
        )
        assert all(isinstance(r, Job) for group in results for r in group), results
        with psycopg.connect(db_url) as conn:
            counts = dict(conn.execute("SELECT key, n FROM shared").fetchall())
        assert counts == {"x": 2, "y": 2}  # each effect once, whatever happened
        return group_a + group_b
    finally:
        for pool in pools:
            await pool.close()


async def test_declared_keys_keep_crossing_groups_from_deadlocking(db_url: str) -> None:
    outcomes = await crossing_groups(db_url, declare=True)
    assert [o.invocations for o in outcomes] == [1, 1, 1, 1]


async def test_without_keys_crossing_groups_deadlock_and_rerun(db_url: str) -> None:
    outcomes = await crossing_groups(db_url, declare=False)
    # The negative control: PostgreSQL broke the deadlock by aborting a group,
    # whose callbacks then ran again one job at a time.
    assert max(o.invocations for o in outcomes) == 2


async def test_lock_keys_serialises_a_transaction_of_your_own(db_url: str) -> None:
    pool = await open_pool(db_url, worker_concurrency=2)
    try:
        async with pool.connection() as holder, holder.transaction():
            await lock_keys(holder, "site:1", "site:2")
            async with pool.connection() as other:
                await other.execute("SET lock_timeout = '200ms'")
                with pytest.raises(psycopg.errors.LockNotAvailable):
                    async with other.transaction():
                        await lock_keys(other, "site:2")
                async with other.transaction():
                    await lock_keys(other, "site:3")  # another key never waits
    finally:
        await pool.close()


def test_a_key_has_one_id_everywhere_and_bad_keys_are_refused() -> None:
    assert key_lock_id("site:1") == key_lock_id("site:1")
    assert key_lock_id("site:1") != key_lock_id("site:2")
    assert key_lock_id("site:1") == -999125044086984816
    ctx = JobContext(Job.model_construct())
    ctx.lock("a", "b", "a")
    assert ctx.lock_keys == ("a", "b")
    from jobrun.errors import ConfigurationError

    for bad in ("", "\ud800"):
        with pytest.raises(ConfigurationError):
            ctx.lock(bad)


async def test_a_handler_s_declared_keys_are_held_while_its_callback_runs(db_url: str) -> None:
    from jobrun import Client, Registry

    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE seen (job_id uuid, advisory_locks bigint)")
    registry = Registry()

    @registry.handler("count")
    async def count(ctx: JobContext, payload: Any) -> Any:
        ctx.lock(f"site:{payload['site']}", "global")

        async def commit(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO seen SELECT %s, count(*) FROM pg_locks "
                "WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted",
                (ctx.job.id,),
            )

        return commit

    async with Client(registry, database_url=db_url, concurrency=1) as client:
        await client.enqueue(NewJob(type="count", payload={"site": 1}))
        await client.run_worker(drain=True)
    with psycopg.connect(db_url) as conn:
        (held,) = conn.execute("SELECT advisory_locks FROM seen").fetchone() or (None,)
    assert held == 2
