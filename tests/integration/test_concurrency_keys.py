"""Concurrency limited per key against PostgreSQL: a key's jobs beyond its limit
wait, unclaimable, and are admitted in enqueue order as its admitted jobs end;
other keys are not held up; a retry keeps its slot; jobs ended outside a
completion free theirs at the maintenance pass; bad input is refused whole."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from jobrun import Client, JobContext, Registry
from jobrun.domain import JobState, NewJob, Outcome, OutcomeKind, SyncOutcome
from jobrun.errors import ConfigurationError, InvalidJob
from jobrun.postgres import Pool, Store, SyncStore, open_sync_pool

LEASE = timedelta(minutes=5)


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


def keyed(key: str, n: int, **fields: Any) -> NewJob:
    fields.setdefault("concurrency_limit", 2)
    return NewJob(type="sync", payload={"n": n}, concurrency_key=key, **fields)


async def states(store: Store, jobs: list[NewJob]) -> list[str]:
    return [(await store.get(job.id)).state.value for job in jobs]


async def test_a_keys_jobs_past_its_limit_wait_and_are_admitted_in_order(store: Store) -> None:
    a = [keyed("customer:a", n) for n in range(5)]
    b = [keyed("customer:b", n) for n in range(2)]
    made = [await store.enqueue(job) for job in [*a, *b]]
    assert [m.state.value for m in made] == ["queued"] * 2 + ["waiting"] * 3 + ["queued"] * 2
    held = {job.id: job for job in await store.claim(["default"], "w", 10, LEASE)}
    assert set(held) == {a[0].id, a[1].id, b[0].id, b[1].id}  # the waiting are never claimed
    # One of a's admitted jobs succeeds: its slot goes to a's oldest waiting job.
    await store.record_outcomes("w", [Outcome(job=held[a[0].id])])
    assert await states(store, a) == ["succeeded", "leased", "queued", "waiting", "waiting"]
    admitted = [e.kind for e in await store.events(a[2].id)]
    assert admitted == ["enqueued", "admitted"]
    # A failure that will be retried keeps its slot: nothing more is admitted.
    await store.record_outcomes("w", [Outcome(job=held[a[1].id], kind=OutcomeKind.FAIL)])
    assert await states(store, a) == ["succeeded", "queued", "queued", "waiting", "waiting"]
    # b's jobs were never held up by a's.
    assert await states(store, b) == ["leased", "leased"]


async def test_a_batch_admits_up_to_the_limit_and_a_dead_job_frees_its_slot(store: Store) -> None:
    jobs = [keyed("k", n, max_attempts=1) for n in range(4)]
    made = await store.enqueue_batch(jobs)
    assert [m.state.value for m in made] == ["queued", "queued", "waiting", "waiting"]  # type: ignore[union-attr]
    held = await store.claim(["default"], "w", 10, LEASE)
    assert {h.id for h in held} == {jobs[0].id, jobs[1].id}
    await store.record_outcomes("w", [Outcome(job=h, kind=OutcomeKind.FAIL) for h in held])
    assert await states(store, jobs) == ["dead", "dead", "queued", "queued"]


async def test_jobs_ended_outside_a_completion_free_their_slots_at_the_maintenance_pass(
    store: Store,
) -> None:
    jobs = [keyed("k", n) for n in range(3)]
    for job in jobs:
        await store.enqueue(job)
    await store.cancel(jobs[0].id)  # queued: cancelled at once, but no completion ran
    assert await states(store, jobs) == ["cancelled", "queued", "waiting"]
    assert await store.settle_concurrency() == 1
    assert await states(store, jobs) == ["cancelled", "queued", "queued"]
    assert await store.settle_concurrency() == 0
    # A waiting job cancelled or deleted takes no slot when its turn comes.
    more = [keyed("k", n) for n in range(3, 6)]
    for job in more:
        await store.enqueue(job)
    await store.cancel(more[0].id)
    await store.delete_jobs([more[1].id])
    held = await store.claim(["default"], "w", 10, LEASE)
    await store.record_outcomes("w", [Outcome(job=h) for h in held])
    assert (await store.get(more[2].id)).state is JobState.QUEUED


async def test_the_maintenance_pass_admits_what_a_lost_admission_left_waiting(
    store: Store, pool: Pool
) -> None:
    jobs = [keyed("k", n) for n in range(3)]
    for job in jobs:
        await store.enqueue(job)
    # As if the completion committed and its process died before admitting.
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = %s", (jobs[0].id,)
        )
        await conn.execute(
            "UPDATE job_concurrency SET status = 'ended' WHERE job_id = %s", (jobs[0].id,)
        )
    assert await states(store, jobs) == ["succeeded", "queued", "waiting"]
    assert await store.settle_concurrency(batch_size=1) == 1
    assert await states(store, jobs) == ["succeeded", "queued", "queued"]


async def test_bad_keys_and_limits_are_refused_and_nothing_is_written(store: Store) -> None:
    with pytest.raises(InvalidJob, match="concurrency_limit"):
        await store.enqueue(NewJob(type="sync", concurrency_key="k"))
    with pytest.raises(InvalidJob, match="concurrency_limit"):
        await store.enqueue_batch([keyed("k", 1), NewJob(type="sync", concurrency_key="k")])
    for bad in (
        {"concurrency_key": ""},
        {"concurrency_key": "x" * 256},
        {"concurrency_key": "a\x00b"},
        {"concurrency_key": "k", "concurrency_limit": 0},
        {"concurrency_key": "k", "concurrency_limit": 10_001},
        {"concurrency_key": "k", "concurrency_limit": 2, "idempotency_key": "i"},
    ):
        with pytest.raises(InvalidJob):
            NewJob(type="sync", **bad)
    # A limit alone limits nothing: it caps the jobs that share a key.
    with pytest.raises(InvalidJob, match="concurrency_limit needs a concurrency_key"):
        NewJob(type="sync", concurrency_limit=2)
    assert (await store.list_jobs()).jobs == []


async def test_a_handler_declares_its_types_limit(db_url: str) -> None:
    registry = Registry()

    @registry.handler("per.customer", concurrency_limit=1)
    async def work(ctx: JobContext, payload: Any) -> None:
        return None

    async with Client(registry, database_url=db_url) as client:
        first = await client.enqueue(NewJob(type="per.customer", concurrency_key="c:1"))
        second = await client.enqueue(NewJob(type="per.customer", concurrency_key="c:1"))
        other = await client.enqueue(NewJob(type="per.customer", concurrency_key="c:2"))
        # The declared limit is filled in on a job without a key too, and limits nothing.
        keyless = await client.enqueue(NewJob(type="per.customer"))
        assert [first.state, second.state, other.state, keyless.state] == [
            JobState.QUEUED,
            JobState.WAITING,
            JobState.QUEUED,
            JobState.QUEUED,
        ]
        await client.run_worker(drain=True)
        assert (await client.store.get(second.id)).state is JobState.SUCCEEDED


def test_the_sync_store_admits_the_same_way(db_url: str) -> None:
    pool = open_sync_pool(db_url, max_size=3)
    try:
        store = SyncStore(pool)
        made = [store.enqueue(keyed("s", n)) for n in range(3)]
        assert [m.state for m in made] == [JobState.QUEUED, JobState.QUEUED, JobState.WAITING]
        held = store.claim(["default"], "w", 10, LEASE)
        store.record_outcomes("w", [SyncOutcome(job=held[0])])
        assert store.get(made[2].id).state is JobState.QUEUED
    finally:
        pool.close()


async def test_a_retried_job_with_a_key_waits_for_its_keys_turn(store: Store) -> None:
    first, second = (keyed("k", n, max_attempts=1, concurrency_limit=1) for n in range(2))
    await store.enqueue(first)
    await store.enqueue(second)
    (held,) = await store.claim(["default"], "w", 10, LEASE)
    await store.record_outcomes("w", [Outcome(job=held, kind=OutcomeKind.FAIL)])
    assert await states(store, [first, second]) == ["dead", "queued"]
    again = await store.retry(first.id)
    assert again.state is JobState.WAITING  # second holds the key's one slot
    assert [e.to_state for e in await store.events(first.id)][-1] is JobState.WAITING
    (running,) = await store.claim(["default"], "w", 10, LEASE)
    assert running.id == second.id
    await store.record_outcomes("w", [Outcome(job=running)])
    assert await states(store, [first, second]) == ["queued", "succeeded"]
    # With room, a retried job is queued at once.
    (last,) = await store.claim(["default"], "w", 10, LEASE)
    await store.record_outcomes("w", [Outcome(job=last, kind=OutcomeKind.FAIL)])
    assert (await store.retry(first.id)).state is JobState.QUEUED


async def test_a_queues_limit_per_key_applies_to_its_keyed_jobs_without_their_own(
    store: Store,
) -> None:
    def job(key: str, **fields: Any) -> NewJob:
        return NewJob(type="sync", queue="billing", concurrency_key=key, **fields)

    with pytest.raises(InvalidJob, match="--per-key"):
        await store.enqueue(job("k"))
    assert (await store.list_jobs()).jobs == []
    controls = await store.set_queue_limits("billing", key_limit=1, actor="ops")
    assert (controls.key_limit, controls.concurrency_limit, controls.rate_limit) == (1, None, None)
    first, second = job("k"), job("k")
    own = [job("mine", concurrency_limit=2) for _ in range(2)]  # its own limit wins
    made = [await store.enqueue(j) for j in (first, second, *own)]
    assert [m.state.value for m in made] == ["queued", "waiting", "queued", "queued"]
    # A queue with only a limit per key is still claimed as before.
    assert len(await store.claim(["billing"], "w", 10, LEASE)) == 3
    # A raised limit applies at the next admission (here the maintenance pass's).
    await store.set_queue_limits("billing", key_limit=2)
    assert await store.settle_concurrency() == 1
    assert (await store.get(second.id)).state is JobState.QUEUED
    listed = {q.name: q for q in await store.list_queues()}
    assert listed["billing"].key_limit == 2
    assert (await store.clear_queue_limits("billing")).key_limit is None
    for bad in (0, 10_001, True, 2.5):
        with pytest.raises(ConfigurationError, match="limit per key"):
            await store.set_queue_limits("billing", key_limit=bad)  # type: ignore[arg-type]


async def test_a_key_is_one_line_across_queues(store: Store) -> None:
    # A key names one set of slots wherever its jobs are queued: a job of the
    # key in another queue waits behind the key's older waiting jobs, even
    # when its own limit has room (the guide says so under "Limits").
    def job(queue: str, limit: int) -> NewJob:
        return NewJob(type="sync", queue=queue, concurrency_key="k", concurrency_limit=limit)

    first, second = job("a", 1), job("a", 1)
    later = job("b", 3)
    made = [await store.enqueue(j) for j in (first, second, later)]
    assert [m.state.value for m in made] == ["queued", "waiting", "waiting"]
    held = await store.claim(["a", "b"], "w", 10, LEASE)
    assert [h.id for h in held] == [first.id]
    # Its slot frees: the oldest waiting job is admitted first, under its own
    # limit (1), so the job in queue b still waits.
    await store.record_outcomes("w", [Outcome(job=held[0])])
    assert await states(store, [second, later]) == ["queued", "waiting"]
    # Once it is the oldest waiting, its own limit (3) is the key's: the next
    # admission (here the maintenance pass's) lets it in beside the admitted one.
    assert await store.settle_concurrency() == 1
    assert await states(store, [second, later]) == ["queued", "queued"]
