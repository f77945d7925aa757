"""Retention: the maintenance service's pruning (pinned clock) and its leader election."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from uuid import UUID

import psycopg
import pytest
from psycopg import sql

from jobrun.config import Config
from jobrun.domain import Effect, Job, JobState, NewJob
from jobrun.errors import ConfigurationError
from jobrun.maintenance import Maintenance, Pruned
from jobrun.postgres import Pool, SyncStore, open_sync_pool
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.store import Store

LEASE = timedelta(seconds=30)


class NoLocker:
    """prune_once never takes the lock; a test that only prunes needs no locker."""

    async def try_acquire(self, key: int) -> None:
        raise AssertionError("prune_once must not take the lock")


async def finished(store: Store, db_url: str, state: JobState, finished_at: datetime) -> UUID:
    """A job in ``state`` whose finished_at is ``finished_at``."""
    job = await store.enqueue(NewJob(type="t", max_attempts=1, queue=f"q-{uuid.uuid4().hex}"))
    if state is JobState.CANCELLED:
        await store.cancel(job.id)
    else:
        (claimed,) = await store.claim([job.queue], "w1", 1, LEASE)
        if state is JobState.SUCCEEDED:
            await store.complete(claimed, "w1")
        else:
            await store.fail(claimed, "w1", "boom")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("UPDATE jobs SET finished_at = %s WHERE id = %s", (finished_at, job.id))
    got = await store.get(job.id)
    assert got.state is state
    return job.id


async def job_ids(db_url: str) -> set[UUID]:
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute("SELECT id FROM jobs")
        return {row[0] for row in await cur.fetchall()}


async def count(db_url: str, table: str) -> int:
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("batch_size", [1, 1000])
async def test_a_pass_deletes_each_finished_state_by_its_own_age(
    pool: Pool, db_url: str, batch_size: int
) -> None:
    store = Store(pool)
    now = await store.now()
    hours = timedelta(hours=1)
    days = timedelta(days=1)
    keep = {
        await finished(store, db_url, JobState.SUCCEEDED, now - 23 * hours),
        await finished(store, db_url, JobState.CANCELLED, now - 6 * days),
        await finished(store, db_url, JobState.DEAD, now - 13 * days),
        # Older than the succeeded age, but cancelled and dead jobs keep longer.
        await finished(store, db_url, JobState.CANCELLED, now - 2 * days),
        await finished(store, db_url, JobState.DEAD, now - 8 * days),
        (await store.enqueue(NewJob(type="queued"))).id,
    }
    gone = {
        await finished(store, db_url, JobState.SUCCEEDED, now - 25 * hours),
        await finished(store, db_url, JobState.SUCCEEDED, now - 3 * days),
        await finished(store, db_url, JobState.SUCCEEDED, now - 30 * days),
        await finished(store, db_url, JobState.CANCELLED, now - 8 * days),
        await finished(store, db_url, JobState.DEAD, now - 15 * days),
    }
    maintenance = Maintenance(
        store, NoLocker(), Config(), batch_size=batch_size, pause=timedelta(0)
    )

    pruned = await maintenance.prune_once(now=now)

    assert pruned == Pruned(succeeded=3, cancelled=1, dead=1)
    assert await job_ids(db_url) == keep
    assert not gone & keep
    # A purged job's events go with it; the kept jobs keep theirs.
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute("SELECT DISTINCT job_id FROM job_events")
        assert {row[0] for row in await cur.fetchall()} == keep
    # Nothing else is old enough; a second pass deletes nothing.
    assert (await maintenance.prune_once(now=now)).total == 0
    # A day later (pinned clock) the 23-hour-old succeeded job is due too.
    assert await maintenance.prune_once(now=now + days) == Pruned(succeeded=1)


async def test_custom_ages_are_honoured(pool: Pool, db_url: str) -> None:
    store = Store(pool)
    now = await store.now()
    young = await finished(store, db_url, JobState.DEAD, now - timedelta(hours=2))
    old = await finished(store, db_url, JobState.DEAD, now - timedelta(hours=4))
    config = Config(retention_dead=timedelta(hours=3))
    pruned = await Maintenance(store, NoLocker(), config).prune_once(now=now)
    assert pruned == Pruned(dead=1)
    assert await job_ids(db_url) == {young}
    assert old not in await job_ids(db_url)


async def test_events_and_ledger_rows_are_pruned_by_their_own_age(pool: Pool, db_url: str) -> None:
    store = Store(pool)
    now = await store.now()
    live = await store.enqueue(NewJob(type="t"))
    gone_job, kept_job = uuid.uuid4(), live.id
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        # The live job's enqueued event is 15 days old; a second one is recent.
        await conn.execute("UPDATE job_events SET at = %s", (now - timedelta(days=15),))
        await conn.execute(
            "INSERT INTO job_events (job_id, at, kind, to_state) VALUES (%s, %s, 'note', 'queued')",
            (live.id, now - timedelta(days=13)),
        )
        await conn.execute(
            "INSERT INTO processed_effects (scope, key, job_id, created_at) VALUES"
            " ('s', 'old-gone', %s, %s), ('s', 'old-live', %s, %s), ('s', 'young-gone', %s, %s)",
            (
                gone_job,
                now - timedelta(days=91),
                kept_job,
                now - timedelta(days=91),
                gone_job,
                now - timedelta(days=89),
            ),
        )
    pruned = await Maintenance(
        store, NoLocker(), Config(), batch_size=1, pause=timedelta(0)
    ).prune_once(now=now)
    assert pruned == Pruned(events=1, effects=1)
    assert [e.kind for e in await store.events(live.id)] == ["note"]
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute("SELECT key FROM processed_effects ORDER BY key")
        # A row whose job still exists is never pruned, however old.
        assert [row[0] for row in await cur.fetchall()] == ["old-live", "young-gone"]


async def test_a_ledger_row_outlives_its_purged_job_while_a_replay_of_its_key_waits(
    pool: Pool, db_url: str
) -> None:
    store = Store(pool)
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        await conn.execute("CREATE TABLE sent (job_id uuid NOT NULL)")
    sent = Effect("INSERT INTO sent (job_id) VALUES (%s)", ())
    welcome = {"type": "mail.welcome", "queue": "mail", "idempotency_key": "welcome:'7':x"}
    first = await store.enqueue(NewJob(**welcome))
    (claimed,) = await store.claim(["mail"], "w1", 1, LEASE)
    await store.complete(claimed, "w1", Effect(sent.sql, (claimed.id,)))
    now = await store.now()
    maintenance = Maintenance(store, NoLocker(), Config(), pause=timedelta(0))
    # Two days on, the succeeded job is purged; its ledger row is young and stays.
    assert await maintenance.prune_once(now=now + timedelta(days=2)) == Pruned(succeeded=1)
    replay = await store.enqueue(NewJob(**welcome, delay=timedelta(seconds=1)))
    assert replay.id != first.id and replay.state is JobState.QUEUED
    # Past the ledger's age: the row still guards the queued replay of its key
    # (only the replay's old event goes).
    assert await maintenance.prune_once(now=now + timedelta(days=91)) == Pruned(events=1)
    assert await count(db_url, "processed_effects") == 1

    claimed_replay: list[Job] = []

    async def claim_replay() -> bool:
        claimed_replay.extend(await store.claim(["mail"], "w1", 1, LEASE))
        return bool(claimed_replay)

    await until(claim_replay)
    (again,) = claimed_replay
    done = await store.complete(again, "w1", Effect(sent.sql, (again.id,)))
    assert done.id == replay.id and done.state is JobState.SUCCEEDED
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute("SELECT job_id FROM sent")
        assert [row[0] for row in await cur.fetchall()] == [first.id]
    # Once no job of the key is left, the row goes, but never before its age.
    assert await maintenance.prune_once(now=now + timedelta(days=3)) == Pruned(succeeded=1)
    assert await count(db_url, "processed_effects") == 1
    assert await maintenance.prune_once(now=now + timedelta(days=91)) == Pruned(effects=1)


async def test_a_job_of_another_type_with_the_same_queue_and_key_does_not_hold_a_row(
    pool: Pool, db_url: str
) -> None:
    store = Store(pool)
    await store.enqueue(NewJob(type="a", queue="q", idempotency_key="k"))
    (claimed,) = await store.claim(["q"], "w1", 1, LEASE)
    await store.complete(claimed, "w1", Effect("SELECT 1"))
    now = await store.now()
    maintenance = Maintenance(store, NoLocker(), Config(), pause=timedelta(0))
    assert await maintenance.prune_once(now=now + timedelta(days=2)) == Pruned(succeeded=1)
    await store.enqueue(NewJob(type="b", queue="q", idempotency_key="k"))
    pruned = await maintenance.prune_once(now=now + timedelta(days=91))
    assert pruned.effects == 1


@pytest.mark.parametrize(
    ("queue", "key"),
    [
        ("mail", "k"),
        ("a'b", "x':y"),
        ("a\\b", "k\\':"),
        ("q:'x", "':"),
        ("\\'\\", "E'"),
        ("E", "z"),
    ],
)
async def test_a_ledger_key_gives_back_its_queue_and_idempotency_key(
    db_url: str, queue: str, key: str
) -> None:
    # The inverse of job_effect_key (migration 00011) that pruning probes
    # jobs_idem_uniq with: exact for every quote and backslash quote_literal doubles.
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute(
            "SELECT job_effect_key_queue(k), job_effect_key_idempotency_key(k)"
            " FROM job_effect_key(%s, %s, gen_random_uuid()) AS k",
            (queue, key),
        )
        assert await cur.fetchone() == (queue, key)
        cur = await conn.execute(
            "SELECT job_effect_key_queue(k), job_effect_key_idempotency_key(k)"
            " FROM job_effect_key('q', NULL, gen_random_uuid()) AS k"
        )
        assert await cur.fetchone() == (None, None)


async def test_a_stop_request_ends_a_pass_between_batches(pool: Pool, db_url: str) -> None:
    store = Store(pool)
    now = await store.now()
    for _ in range(3):
        await finished(store, db_url, JobState.SUCCEEDED, now - timedelta(days=2))
    stop = asyncio.Event()
    stop.set()
    pruned = await Maintenance(
        store, NoLocker(), Config(), batch_size=1, pause=timedelta(0)
    ).prune_once(now=now, stop=stop)
    assert pruned == Pruned(succeeded=1, complete=False)
    assert await count(db_url, "jobs") == 2


async def test_the_batch_methods_refuse_what_they_cannot_do(pool: Pool) -> None:
    store = Store(pool)
    with pytest.raises(ConfigurationError, match="finished"):
        await store.purge_finished_batch(JobState.QUEUED, timedelta(days=1))
    with pytest.raises(ConfigurationError, match="batch limit"):
        await store.purge_finished_batch(JobState.DEAD, timedelta(days=1), 0)
    with pytest.raises(ConfigurationError, match="older_than"):
        await store.prune_events_batch(timedelta(days=-1))


async def test_the_sync_store_purges_one_state_in_bounded_batches(pool: Pool, db_url: str) -> None:
    store = Store(pool)
    now = await store.now()
    for _ in range(3):
        await finished(store, db_url, JobState.SUCCEEDED, now - timedelta(days=2))
    kept = await finished(store, db_url, JobState.DEAD, now - timedelta(days=2))
    sync_pool = open_sync_pool(db_url)
    try:
        sync = SyncStore(sync_pool)
        day = timedelta(days=1)
        assert sync.purge_finished_batch(JobState.SUCCEEDED, day, 2, now=now) == 2
        assert sync.purge_finished_batch(JobState.SUCCEEDED, day, 2, now=now) == 1
        assert sync.purge_finished_batch(JobState.SUCCEEDED, day, 2, now=now) == 0
        assert sync.prune_events_batch(day, now=now) == 0
        assert sync.prune_effects_batch(day, now=now) == 0
    finally:
        sync_pool.close()
    assert await job_ids(db_url) == {kept}


# -- leadership ---------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def running(
    db_url: str, pool: Pool, n: int, key: int
) -> AsyncIterator[list[tuple[Maintenance, asyncio.Event, asyncio.Task[None]]]]:
    group = []
    for _ in range(n):
        maintenance = Maintenance(
            Store(pool),
            AdvisoryLocker(
                db_url,
                application_name="jobrun-maint-test",
                probe_every=timedelta(milliseconds=200),
            ),
            Config(
                retention_succeeded=timedelta(hours=1), maintenance_every=timedelta(seconds=0.1)
            ),
            key=key,
            retry_leadership_every=timedelta(milliseconds=200),
        )
        stop = asyncio.Event()
        group.append((maintenance, stop, asyncio.create_task(maintenance.run(stop))))
    try:
        yield group
    finally:
        for _, stop, _ in group:
            stop.set()
        await asyncio.wait_for(asyncio.gather(*(task for _, _, task in group)), 10)


async def until(predicate: Callable[[], Awaitable[bool]], within: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not true within {within}s")


async def test_one_maintenance_leads_and_prunes_and_a_follower_takes_over(
    pool: Pool, db_url: str
) -> None:
    store = Store(pool)
    key = 0x6A6F6272756E0000 + uuid.uuid4().int % 10_000 + 100
    now = await store.now()
    await finished(store, db_url, JobState.SUCCEEDED, now - timedelta(hours=2))
    async with running(db_url, pool, 2, key) as group:

        async def one_leader() -> bool:
            return any(m.is_leader for m, _, _ in group)

        await until(one_leader)

        async def pruned_and_ticked() -> bool:
            return await count(db_url, "jobs") == 0 and max(m.passes for m, _, _ in group) >= 3

        # Sample while the leader ticks: never two leaders, and the follower never prunes.
        deadline = asyncio.get_running_loop().time() + 30
        while not await pruned_and_ticked():
            assert sum(m.is_leader for m, _, _ in group) <= 1
            assert min(m.passes for m, _, _ in group) == 0
            assert asyncio.get_running_loop().time() < deadline, "the leader did not prune"
            await asyncio.sleep(0.02)
        (leader, leader_stop, leader_task) = next(r for r in group if r[0].is_leader)
        (follower, _, _) = next(r for r in group if r[0] is not leader)
        assert follower.passes == 0 and leader.deleted == 1

        # The leader stops (and releases the lock); the follower leads and prunes.
        await finished(store, db_url, JobState.SUCCEEDED, now - timedelta(hours=2))
        leader_stop.set()
        await asyncio.wait_for(leader_task, 10)

        async def follower_pruned() -> bool:
            return follower.is_leader and follower.deleted == 1

        await until(follower_pruned)
        assert await count(db_url, "jobs") == 0
