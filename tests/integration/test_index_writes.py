"""The indexes every job writes, and the readers that lost an index to keep that set small.

Each index on ``jobs`` or ``job_events`` is an entry written per transition
of every job: migration 00010 merged the two indexes of leased jobs into one
and dropped the index on events' time. These tests pin the indexes a job
writes (adding one must be a decision, not an accident) and show that the
statements which used the dropped ones still read only what they need: the
reaper through the merged index (test_queues checks the per-queue count of
running jobs), the event pruner through the primary key, oldest first.
"""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from jobrun.domain import NewJob
from jobrun.postgres import Pool
from jobrun.postgres.store import Store
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries

from .test_batch_plans import explain, scans


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


def index_names(db_url: str, table: str) -> set[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", (table,))
        return {r[0] for r in rows}


def test_a_job_writes_these_indexes_and_no_others(db_url: str) -> None:
    assert index_names(db_url, "jobs") == {
        "jobs_pkey",
        "jobs_claim_idx",
        "jobs_leased_idx",
        "jobs_finished_state_idx",
        "jobs_dead_cancelled_idx",
        "jobs_idem_uniq",
        # Partial: only a job with a uniqueness policy, while it holds its key
        # (migration 00016); every other job only evaluates its predicate.
        "jobs_unique_key_idx",
        # Partial: only waiting jobs (migration 00018), which no claim reads.
        "jobs_waiting_idx",
        # Partial: only waiting, dead and cancelled jobs (migration 00022), for the
        # overview's per-queue counts; a job enqueued, claimed and succeeded never
        # writes it.
        "jobs_parked_queue_idx",
    }
    assert index_names(db_url, "job_events") == {"job_events_pkey", "job_events_job_idx"}


async def test_the_reaper_reads_the_leased_index(store: Store, pool: Pool) -> None:
    for queue in ("a", "b"):
        await store.enqueue_batch([NewJob(type="t", queue=queue) for _ in range(2000)])
    await store.claim(["a"], "w", 50, timedelta(seconds=30))
    async with pool.connection() as conn:
        await conn.execute("ANALYZE jobs")
    reap = scans(
        await explain(
            pool, job_queries.JOB_REAP_EXPIRED, {"now": None, "max_jobs": 1000, "jitter": 0.1}
        )
    )
    on_jobs = [s for s in reap if s[1] == "jobs"]
    assert ("Index Scan", "jobs", "jobs_leased_idx") in [s[:3] for s in on_jobs], reap
    assert all(s[0] != "Seq Scan" for s in on_jobs), reap


async def test_the_reaper_takes_expired_leases_of_every_queue(store: Store) -> None:
    for queue in ("a", "b", "c"):
        await store.enqueue(NewJob(type="t", queue=queue))
    held = await store.claim(["a", "b", "c"], "w", 10, timedelta(seconds=30))
    assert len(held) == 3
    later = await store.now() + timedelta(minutes=1)
    reaped = await store.reap_expired(now=later)
    assert sorted(j.queue for j in reaped) == ["a", "b", "c"]


async def test_pruning_walks_the_primary_key_from_the_oldest_event(
    store: Store, pool: Pool
) -> None:
    await store.enqueue_many("t", [{} for _ in range(5000)])
    async with pool.connection() as conn:
        await conn.execute("ANALYZE job_events")
    plan = scans(
        await explain(
            pool,
            event_queries.EVENT_PRUNE,
            {"now": None, "older_than": timedelta(days=1), "batch_size": 500},
        )
    )
    on_events = {s[:3] for s in plan if s[1] == "job_events"}
    assert ("Index Scan", "job_events", "job_events_pkey") in on_events, plan
    assert all(s[0] != "Seq Scan" for s in on_events), plan


async def test_an_old_event_behind_a_younger_one_waits_for_it(store: Store, db_url: str) -> None:
    young = await store.enqueue(NewJob(type="t"))
    old = await store.enqueue(NewJob(type="t"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE job_events SET at = now() - interval '3 days' WHERE job_id = %s", (old.id,)
        )
    # The oldest event by id is young: a batch of one stops there.
    assert await store.prune_events_batch(timedelta(days=1), 1) == 0
    assert await store.prune_events_batch(timedelta(days=1), 2) == 1
    assert [e.kind for e in await store.events(old.id)] == []
    assert [e.kind for e in await store.events(young.id)] == ["enqueued"]
    # Once the younger one is old enough too, both are gone.
    later = await store.now() + timedelta(days=2)
    assert await store.prune_events(timedelta(days=1), now=later) == 1
    assert await store.events(young.id) == []
