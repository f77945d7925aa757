"""Uniqueness policies against PostgreSQL: which enqueue inserts, which returns the
holder, when a key is freed, and that concurrent producers in separate processes
make one job."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobrun.domain import JobState, NewJob, Outcome, OutcomeKind, Unique
from jobrun.errors import InvalidJob
from jobrun.postgres import Pool, Store
from jobrun.testing import eventually

LEASE = timedelta(minutes=5)
RACER = Path(__file__).with_name("unique_racer.py")


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


def job(payload: Any = None, unique: Unique | None = None, **fields: Any) -> NewJob:
    return NewJob(type="sync", payload=payload or {"account": 7}, unique=unique, **fields)


async def count(store: Store) -> int:
    async with store.pool.connection() as conn:
        row = await (await conn.execute("SELECT count(*) FROM jobs")).fetchone()
    assert row is not None
    return int(row[0])


async def test_unique_until_finished_returns_the_holder_while_it_is_queued_or_running(
    store: Store,
) -> None:
    policy = Unique(by=["account"])
    first = await store.enqueue(job(unique=policy))
    dup = job({"account": 7, "note": "other fields do not count"}, policy)
    again = await store.enqueue(dup)
    assert again.id == first.id != dup.id
    (held,) = await store.claim(["default"], "w1", 1, LEASE)
    assert (await store.enqueue(job(unique=policy))).id == first.id  # running: still held
    other = await store.enqueue(job({"account": 8}, policy))
    assert other.id != first.id
    await store.complete(held, "w1")
    after = await store.enqueue(job(unique=policy))
    assert after.id not in (first.id, other.id)  # finished: the key is free
    assert await count(store) == 3


async def test_unique_until_started_frees_the_key_at_the_first_claim_and_survives_a_retry(
    store: Store,
) -> None:
    policy = Unique(by=["account"], until="started")
    first = await store.enqueue(job(unique=policy))
    assert (await store.enqueue(job(unique=policy))).id == first.id
    (held,) = await store.claim(["default"], "w1", 1, LEASE)
    second = await store.enqueue(job(unique=policy))
    assert second.id != first.id
    # The first attempt fails: back to queued beside the second, no collision.
    (failed,) = await store.record_outcomes(
        "w1", [Outcome(job=held, kind=OutcomeKind.FAIL, detail="boom")]
    )
    assert not isinstance(failed, Exception) and failed.state is JobState.QUEUED
    assert (await store.enqueue(job(unique=policy))).id == second.id


async def test_unique_until_purged_holds_the_key_after_the_job_ends(store: Store) -> None:
    policy = Unique(by=[], until="purged")
    first = await store.enqueue(job(unique=policy))
    (held,) = await store.claim(["default"], "w1", 1, LEASE)
    await store.complete(held, "w1")
    assert (await store.enqueue(job({"any": "payload"}, policy))).id == first.id
    assert await store.purge(timedelta(0)) == 1
    assert (await store.enqueue(job(unique=policy))).id != first.id


async def test_unique_for_a_period_makes_one_job_per_period(store: Store) -> None:
    policy = Unique(by=["account"], period=timedelta(seconds=1))
    first = await store.enqueue(job(unique=policy))

    async def next_period() -> Any:
        made = await store.enqueue(job(unique=policy))
        return made if made.id != first.id else None

    later = await eventually(next_period, what="a job of the next one-second period")
    assert later.id != first.id
    assert await count(store) == 2  # every enqueue before the new period returned the first


async def test_jobs_of_one_type_share_keys_across_queues(store: Store) -> None:
    policy = Unique(by=["account"])
    first = await store.enqueue(job(unique=policy, queue="a/b"))
    again = await store.enqueue(job(unique=policy, queue="c.d"))
    assert (again.id, again.queue) == (first.id, "a/b")


async def test_a_batch_inserts_each_key_once_and_returns_holders_in_place(store: Store) -> None:
    policy = Unique(by=["account"])
    batch = [
        job({"account": 1}, policy),
        job({"account": 1, "x": 2}, policy),
        NewJob(type="plain"),
        job({"account": 2}, policy),
    ]
    made = await store.enqueue_batch(batch)
    assert [m.id for m in made] == [batch[0].id, batch[0].id, batch[2].id, batch[3].id]
    ids = await store.enqueue_many(
        "sync", [{"account": 1}, {"account": 3}, {"account": 3}], unique=policy
    )
    assert ids[0] == batch[0].id and ids[1] == ids[2] != batch[0].id
    assert await count(store) == 4


async def test_a_unique_job_in_a_rolled_back_transaction_leaves_its_key_free(
    store: Store, db_url: str
) -> None:
    policy = Unique(by=["account"])
    async with (
        await psycopg.AsyncConnection.connect(db_url) as conn,
        conn.transaction(force_rollback=True),
    ):
        inside = await store.enqueue(job(unique=policy), conn=conn)
    outside = await store.enqueue(job(unique=policy))
    assert outside.id != inside.id
    assert await count(store) == 1


async def test_a_retried_job_does_not_take_back_a_key_another_job_holds(store: Store) -> None:
    policy = Unique(by=["account"])
    first = await store.enqueue(job(unique=policy, max_attempts=1))
    (held,) = await store.claim(["default"], "w1", 1, LEASE)
    await store.fail(held, "w1", "boom")  # dead: the key is free
    second = await store.enqueue(job(unique=policy))
    assert second.id != first.id
    retried = await store.retry(first.id)
    assert retried.state is JobState.QUEUED
    assert (await store.enqueue(job(unique=policy))).id == second.id


async def test_a_payload_without_the_policys_field_is_refused_and_nothing_is_written(
    store: Store,
) -> None:
    with pytest.raises(InvalidJob, match="the payload has no field 'account'"):
        await store.enqueue(job({"acount": 7}, Unique(by=["account"])))
    with pytest.raises(InvalidJob, match="the payload has no field 'account'"):
        await store.enqueue_batch([NewJob(type="plain"), job({"x": 1}, Unique(by=["account"]))])
    assert await count(store) == 0


def race(db_url: str, tmp_path: Path, processes: int, *flags: str) -> set[str]:
    """``processes`` producers enqueue one job each, released at once; their job ids."""
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(RACER), db_url, str(go), *flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        go.touch()
        ids = set()
        for proc in procs:
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0
            ids.add(out.strip())
    finally:
        for proc in procs:
            proc.kill()
        go.unlink(missing_ok=True)
    return ids


async def test_twenty_producer_processes_at_once_make_one_unique_job(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    assert len(race(db_url, tmp_path, 20, "unique")) == 1
    assert await count(store) == 1
    # While the job runs, twenty more get it back too.
    (held,) = await store.claim(["default"], "w1", 1, LEASE)
    assert race(db_url, tmp_path, 20, "unique") == {str(held.id)}
    assert await count(store) == 1
    # The negative control: the same race without a policy makes twenty jobs.
    assert len(race(db_url, tmp_path, 20)) == 20
    assert await count(store) == 21
