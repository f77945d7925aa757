"""A busy worker claims a little ahead of its free slots: what that buffer may and may not do.

The buffer exists for throughput (a claim or completion statement has a fixed
cost, so short jobs freeing slots a few at a time made both small). These
tests pin down its contract on the real store: never more handlers at once
than ``concurrency``, every job run once, buffered jobs heartbeated, stopped
when cancelled, handed back with their attempt uncounted at shutdown or when
stuck behind a slow job; ``claim_ahead=timedelta(0)`` claims for free slots
only.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from jobrun.domain import JobState, NewJob
from jobrun.postgres import Pool
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry
from jobrun.testing import eventually
from jobrun.worker import Worker

from .test_worker import make_worker, running, wait_state


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


def counting_registry(
    worker_ref: list[Worker], seconds: float
) -> tuple[Registry, list[UUID], list[int], list[int]]:
    """A registry whose handler records its job, how many handlers run and what the worker holds."""
    reg = Registry()
    ran: list[UUID] = []
    executing = [0, 0]  # now, most at once
    held: list[int] = []

    @reg.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        ran.append(ctx.job.id)
        executing[0] += 1
        executing[1] = max(executing[1], executing[0])
        held.append(worker_ref[0].running)
        try:
            await asyncio.sleep(seconds)
        finally:
            executing[0] -= 1

    return reg, ran, executing, held


async def drain_short_jobs(
    store: Store, **worker_settings: Any
) -> tuple[list[UUID], list[UUID], int, int]:
    """Drain 600 jobs that return at once with two slots: (jobs, ran, most at once, most held)."""
    ref: list[Worker] = []
    reg, ran, executing, held = counting_registry(ref, 0)
    jobs = await store.enqueue_many("work", [{} for _ in range(600)])
    worker = make_worker(store, reg, concurrency=2, **worker_settings)
    ref.append(worker)
    await asyncio.wait_for(worker.run(drain=True), 60)
    return jobs, ran, executing[1], max(held)


async def test_a_busy_worker_holds_more_jobs_than_it_runs_and_runs_each_once(
    store: Store,
) -> None:
    jobs, ran, most_running, most_held = await drain_short_jobs(store)
    assert sorted(ran) == sorted(jobs)  # every job, once
    assert most_running <= 2
    # Running plus reporting jobs are at most twice the concurrency; more
    # than that held means jobs were claimed ahead.
    assert most_held > 2 * 2
    assert most_held <= 2 * 2 + 10 * 2
    for job_id in jobs[:5] + jobs[-5:]:
        assert (await store.get(job_id)).state is JobState.SUCCEEDED


async def test_claim_ahead_zero_claims_for_free_slots_only(store: Store) -> None:
    jobs, ran, most_running, most_held = await drain_short_jobs(store, claim_ahead=timedelta(0))
    assert sorted(ran) == sorted(jobs)
    assert most_running <= 2
    assert most_held <= 2 * 2


async def test_a_stopping_worker_hands_back_the_jobs_it_claimed_ahead(store: Store) -> None:
    ref: list[Worker] = []
    reg, ran, executing, _ = counting_registry(ref, 0.02)
    jobs = await store.enqueue_many("work", [{} for _ in range(40)])
    # A long claim_ahead so that the buffer reaches its cap (ten jobs for
    # concurrency 1) although these jobs start only fifty times a second.
    worker = make_worker(store, reg, concurrency=1, claim_ahead=timedelta(seconds=10))
    ref.append(worker)
    async with running(worker) as stop:

        async def buffered() -> bool:
            return worker.running >= 6

        await eventually(buffered)
        stop.set()
    assert executing[1] <= 1
    assert len(ran) == len(set(ran))
    states = {job_id: await store.get(job_id) for job_id in jobs}
    assert not [j for j in states.values() if j.state is JobState.LEASED]
    handed = [j for j in states.values() if "before the job started" in (j.last_error or "")]
    assert len(handed) >= 4
    for job in handed:
        assert job.state is JobState.QUEUED
        assert job.attempts == 0  # claimed ahead, never run: the attempt is not counted
        assert job.id not in ran
        kinds = [e.kind for e in await store.events(job.id)]
        assert kinds == ["enqueued", "claimed", "released"]
    for job_id in ran:
        assert states[job_id].state is JobState.SUCCEEDED


async def test_a_job_cancelled_while_claimed_ahead_ends_cancelled_without_running(
    store: Store,
) -> None:
    ref: list[Worker] = []
    reg, ran, _, _ = counting_registry(ref, 0.06)
    jobs = await store.enqueue_many("work", [{} for _ in range(12)])
    last = jobs[-1]
    worker = make_worker(store, reg, concurrency=1, claim_ahead=timedelta(seconds=10))
    ref.append(worker)
    async with running(worker):

        async def last_leased() -> bool:
            return (await store.get(last)).state is JobState.LEASED

        await eventually(last_leased)
        # Leased but far from its turn (eleven jobs of 60 ms each before it).
        assert last not in ran
        assert (await store.cancel(last)).cancel_requested
        ended = await wait_state(store, last, JobState.CANCELLED)
        await wait_state(store, jobs[-2], JobState.SUCCEEDED)
    assert last not in ran
    assert ended.attempts == 1
    assert [e.kind for e in await store.events(last)][-1] == "cancelled"
    assert sorted(ran) == sorted(jobs[:-1])


async def test_jobs_stuck_behind_a_slow_job_are_handed_back_for_other_workers(
    store: Store,
) -> None:
    reg = Registry()
    ran: list[UUID] = []

    slow_may_end = asyncio.Event()

    @reg.handler("nap")
    async def nap(ctx: JobContext, payload: Any) -> None:
        ran.append(ctx.job.id)
        if payload.get("slow"):
            await slow_may_end.wait()
        await asyncio.sleep(payload["sleep"])

    fast = await store.enqueue_many("nap", [{"sleep": 0.005}] * 40)
    slow = (await store.enqueue(NewJob(type="nap", payload={"sleep": 0, "slow": True}))).id
    behind = await store.enqueue_many("nap", [{"sleep": 0.005}] * 20)
    # 100 ms of starts ahead at about 150 starts a second: the buffer is full
    # (ten jobs) when the slow job starts, and a buffered job's patience is 1 s.
    worker = make_worker(store, reg, concurrency=1, claim_ahead=timedelta(milliseconds=100))
    async with running(worker):

        async def slow_started() -> bool:
            return slow in ran

        await eventually(slow_started)
        handed: list[UUID] = []

        async def some_handed_back() -> bool:
            for job_id in behind:
                job = await store.get(job_id)
                if "waited more than" in (job.last_error or ""):
                    handed.append(job_id)
                    assert job.state is JobState.QUEUED and job.attempts == 0
            return bool(handed)

        # While the slow job still runs (it ends only when told): free for another worker.
        await eventually(some_handed_back)
        assert ran[-1] == slow
        slow_may_end.set()
        # The handed-back jobs are due again as of their hand-back, after the rest.
        for job_id in behind:
            await wait_state(store, job_id, JobState.SUCCEEDED, within=20)
    assert sorted(ran) == sorted([*fast, slow, *behind])  # each once
    for job_id in handed:
        kinds = [e.kind for e in await store.events(job_id)]
        assert kinds == ["enqueued", "claimed", "released", "claimed", "succeeded"]
