"""Dependencies between jobs against PostgreSQL: a dependent waits unclaimed, is
released by the statement that ends its last dependency (once), follows its
policy when one fails, and the maintenance leader settles what the completions
could not."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from jobrun.domain import JobState, NewJob, Outcome, OutcomeKind
from jobrun.errors import InvalidJob
from jobrun.postgres import Pool, Store
from jobrun.testing import eventually

LEASE = timedelta(minutes=5)


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def states(store: Store, *jobs: Any) -> list[JobState]:
    return [(await store.get(job.id)).state for job in jobs]


async def finish(store: Store, *jobs: Any, kind: OutcomeKind = OutcomeKind.COMPLETE) -> None:
    """Claim exactly ``jobs`` (all due in their queue) and record one outcome for all together."""
    held = await store.claim(["default"], "w", 100, LEASE)
    wanted = {job.id for job in jobs}
    assert wanted <= {h.id for h in held}, "the jobs to finish were not all due"
    outcomes = [Outcome(job=h, kind=kind, detail="boom") for h in held if h.id in wanted]
    rest = [
        Outcome(job=h, kind=OutcomeKind.RELEASE, detail="not now")
        for h in held
        if h.id not in wanted
    ]
    await store.record_outcomes("w", outcomes + rest)


async def test_a_dependent_waits_unclaimed_until_its_dependency_succeeds(store: Store) -> None:
    first = await store.enqueue(NewJob(type="a"))
    then = await store.enqueue(NewJob(type="b", depends_on=[first.id]))
    assert then.state is JobState.WAITING
    (held,) = await store.claim(["default"], "w", 10, LEASE)
    assert held.id == first.id  # the waiting job is never claimed
    await store.complete(held, "w")
    assert await states(store, then) == [JobState.QUEUED]
    kinds = [(e.kind, e.from_state, e.to_state) for e in await store.events(then.id)]
    assert kinds == [
        ("enqueued", None, JobState.WAITING),
        ("ready", JobState.WAITING, JobState.QUEUED),
    ]
    deps = await store.dependencies_of(then.id)
    assert [(d.job_id, d.state, d.if_failed) for d in deps] == [
        (first.id, JobState.SUCCEEDED, "cancel")
    ]


async def test_a_diamond_releases_its_last_step_once_when_both_branches_end_together(
    store: Store,
) -> None:
    top = await store.enqueue(NewJob(type="top"))
    left = await store.enqueue(NewJob(type="left", depends_on=[top.id]))
    right = await store.enqueue(NewJob(type="right", depends_on=[top.id]))
    bottom = await store.enqueue(NewJob(type="bottom", depends_on=[left.id, right.id]))
    await finish(store, top)
    assert await states(store, left, right, bottom) == [JobState.QUEUED] * 2 + [JobState.WAITING]
    await finish(store, left, right)  # one statement ends both branches
    assert await states(store, bottom) == [JobState.QUEUED]
    ready = [e for e in await store.events(bottom.id) if e.kind == "ready"]
    assert len(ready) == 1


async def test_a_failed_dependency_cancels_or_runs_its_dependents_as_each_said(
    store: Store,
) -> None:
    doomed = await store.enqueue(NewJob(type="a", max_attempts=1))
    cancel = await store.enqueue(NewJob(type="b", depends_on=[doomed.id]))
    run = await store.enqueue(NewJob(type="c", depends_on=[doomed.id], if_dependency_fails="run"))
    await finish(store, doomed, kind=OutcomeKind.FAIL)
    assert await states(store, doomed, cancel, run) == [
        JobState.DEAD,
        JobState.CANCELLED,
        JobState.QUEUED,
    ]
    cancelled = await store.get(cancel.id)
    assert cancelled.last_error == "cancelled: a job it depends on ended dead or cancelled"
    assert cancelled.finished_at is not None


async def test_a_dependency_already_ended_decides_the_state_at_enqueue(store: Store) -> None:
    done = await store.enqueue(NewJob(type="a"))
    dead = await store.enqueue(NewJob(type="b", max_attempts=1))
    await finish(store, done)
    await finish(store, dead, kind=OutcomeKind.FAIL)
    assert (await store.enqueue(NewJob(type="c", depends_on=[done.id]))).state is JobState.QUEUED
    gone = await store.enqueue(NewJob(type="d", depends_on=[done.id, dead.id]))
    assert gone.state is JobState.CANCELLED
    assert (await store.get(gone.id)).state is JobState.CANCELLED
    anyway = await store.enqueue(NewJob(type="e", depends_on=[dead.id], if_dependency_fails="run"))
    assert anyway.state is JobState.QUEUED


async def test_unknown_dependencies_are_refused_and_nothing_is_written(store: Store) -> None:
    real = await store.enqueue(NewJob(type="a"))
    ghost = "0190b3c4-0000-7000-8000-000000000000"
    with pytest.raises(InvalidJob, match="1 of its depends_on do not exist"):
        await store.enqueue(NewJob(type="b", depends_on=[real.id, ghost]))
    later = NewJob(type="c", depends_on=[real.id])
    with pytest.raises(InvalidJob, match="do not exist"):
        # A job with dependencies later in the batch does not exist yet: no cycle can form.
        await store.enqueue_batch([NewJob(type="d", depends_on=[later.id]), later])
    assert [j.id for j in (await store.list_jobs(limit=10)).jobs] == [real.id]
    with pytest.raises(InvalidJob, match="cannot depend on itself"):
        own = NewJob(type="x")
        NewJob(type="x", id=own.id, depends_on=[own.id])


async def test_a_batch_may_depend_on_its_earlier_jobs(store: Store) -> None:
    first = NewJob(type="a")
    second = NewJob(type="b", depends_on=[first.id])
    third = NewJob(type="c", depends_on=[first.id, second.id])
    made = await store.enqueue_batch([first, second, third])
    assert [m.state for m in made if not isinstance(m, Exception)] == [
        JobState.QUEUED,
        JobState.WAITING,
        JobState.WAITING,
    ]
    await finish(store, first)
    await finish(store, second)
    assert await states(store, third) == [JobState.QUEUED]


async def test_the_settling_pass_ends_what_completions_did_not_see(store: Store) -> None:
    # An operator cancels a queued dependency: no completion sees it.
    first = await store.enqueue(NewJob(type="a"))
    middle = await store.enqueue(NewJob(type="b", depends_on=[first.id]))
    last = await store.enqueue(NewJob(type="c", depends_on=[middle.id]))
    runs_anyway = await store.enqueue(
        NewJob(type="d", depends_on=[first.id], if_dependency_fails="run")
    )
    await store.cancel(first.id)
    assert await states(store, middle, last, runs_anyway) == [JobState.WAITING] * 3
    settled, cursor = await store.settle_waiting()
    assert (settled, cursor) == (2, None)
    assert await states(store, middle, runs_anyway) == [JobState.CANCELLED, JobState.QUEUED]
    # The cancel reaches the next step at the next pass.
    assert await store.settle_waiting() == (1, None)
    assert await states(store, last) == [JobState.CANCELLED]
    assert await store.settle_waiting() == (0, None)


async def test_the_settling_pass_walks_every_waiting_job_a_batch_at_a_time(store: Store) -> None:
    blocker = await store.enqueue(NewJob(type="a"))
    waiting = [await store.enqueue(NewJob(type="w", depends_on=[blocker.id])) for _ in range(5)]
    settled, cursor = await store.settle_waiting(batch_size=2)
    assert settled == 0 and cursor is not None
    settled, cursor = await store.settle_waiting(cursor, batch_size=2)
    settled, cursor = await store.settle_waiting(cursor, batch_size=2)
    assert cursor is None  # the fifth and last
    assert await states(store, *waiting) == [JobState.WAITING] * 5


async def test_a_waiting_job_can_be_cancelled(store: Store) -> None:
    first = await store.enqueue(NewJob(type="a"))
    then = await store.enqueue(NewJob(type="b", depends_on=[first.id]))
    cancelled = await store.cancel(then.id)
    assert cancelled.state is JobState.CANCELLED
    await finish(store, first)
    assert await states(store, then) == [JobState.CANCELLED]


async def test_a_purged_or_deleted_dependent_takes_its_edges_with_it(store: Store) -> None:
    first = await store.enqueue(NewJob(type="a"))
    purged = await store.enqueue(NewJob(type="b", depends_on=[first.id]))
    deleted = await store.enqueue(NewJob(type="c", depends_on=[first.id]))

    async def edges() -> int:
        async with store.pool.connection() as conn:
            row = await (await conn.execute("SELECT count(*) FROM job_dependencies")).fetchone()
        assert row is not None
        return int(row[0])

    assert await edges() == 2
    assert await store.delete_jobs([deleted.id]) == [deleted.id]
    assert await edges() == 1
    await finish(store, first)
    await finish(store, purged)
    assert await store.purge(timedelta(0)) == 2
    assert await edges() == 0


@pytest.mark.parametrize("wait_row", [True, False], ids=["released", "negative-control"])
async def test_two_completions_ending_the_last_two_dependencies_at_once_release_once(
    store: Store, pool: Pool, wait_row: bool
) -> None:
    """Two transactions end a job's last two dependencies at the same time: the
    first holds its transaction open (a commit callback waits) while the second
    records its outcome. Each statement's snapshot predates the other's commit,
    so states alone would show each the other's dependency still running; the
    job_waits row serializes them, and the second releases the job. Without the
    row (the negative control: as a job enqueued before migration 00019 has
    none) neither completion releases it, and only the settling pass would."""
    left = await store.enqueue(NewJob(type="left"))
    right = await store.enqueue(NewJob(type="right"))
    bottom = await store.enqueue(NewJob(type="bottom", depends_on=[left.id, right.id]))
    if not wait_row:
        async with pool.connection() as conn:
            await conn.execute("DELETE FROM job_waits WHERE job_id = %s", (bottom.id,))
    held = {job.id: job for job in await store.claim(["default"], "w", 10, LEASE)}
    recorded, release = asyncio.Event(), asyncio.Event()

    async def hold_open(conn: Any) -> None:
        recorded.set()
        await release.wait()

    first = asyncio.create_task(
        store.record_outcomes("w", [Outcome(job=held[left.id], commit=hold_open)])
    )
    await asyncio.wait_for(recorded.wait(), 30)
    second = asyncio.create_task(store.record_outcomes("w", [Outcome(job=held[right.id])]))

    async def second_is_blocked_or_done() -> bool:
        if second.done():
            return True
        async with pool.connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            )
            return (await cur.fetchone())[0] > 0  # type: ignore[index]

    # With the row, the second waits for the first's lock on it; without, it commits.
    await eventually(second_is_blocked_or_done, what="the second completion to reach its lock")
    release.set()
    await asyncio.wait_for(asyncio.gather(first, second), 30)
    assert await states(store, left, right) == [JobState.SUCCEEDED] * 2
    expected = JobState.QUEUED if wait_row else JobState.WAITING
    assert await states(store, bottom) == [expected]
    if wait_row:
        assert [e.kind for e in await store.events(bottom.id)].count("ready") == 1
