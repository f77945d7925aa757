"""A cancel requested while a handler runs, and the effect the handler then returns.

The rule: a cancel requested before the completion transaction wins. The job
ends ``cancelled`` and its effect is skipped: no ledger row, no commit
callback, no Effect statement; its events and the observer say cancelled. The
state and the effect never disagree, whichever way the handler hands its
effect over (async callback, ``Effect``, sync handler) and whether or not the
job completes in a group with others, which are not held back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from tests.integration.test_effects import INSERT, claimed_jobs, effects_db, notes
from tests.integration.test_store import Stores, stores
from tests.integration.test_worker import wait_state

from jobrun.config import Config
from jobrun.domain import Effect, Job, JobState, NewJob, Outcome
from jobrun.postgres import Pool
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry
from jobrun.telemetry.hooks import Observer
from jobrun.worker import Worker

__all__ = ["effects_db", "stores"]


class Outcomes(Observer):
    """Records how each attempt ended, as the worker reports it."""

    def __init__(self) -> None:
        self.seen: dict[UUID, list[str]] = {}

    def finished(self, job: Job, outcome: str, run_seconds: float) -> None:
        self.seen.setdefault(job.id, []).append(outcome)


@asynccontextmanager
async def quiet_worker(store: Store, reg: Registry, observer: Observer) -> AsyncIterator[None]:
    """A worker whose heartbeat comes too late to see a cancel during the test."""
    config = Config(
        concurrency=10,
        poll=timedelta(milliseconds=50),
        lease=timedelta(minutes=5),
        heartbeat_every=timedelta(minutes=1),
        reap_every=timedelta(minutes=1),
        shutdown_grace=timedelta(seconds=5),
    )
    worker = Worker(store, reg, config, observer=observer)
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


def _gated_handler(kind: str, gate: threading.Event, started: threading.Event) -> Any:
    """A handler of ``kind`` that waits at ``gate``, then returns its effect."""

    def effect(job: Job) -> Any:
        if kind.endswith("effect"):
            return Effect(INSERT, (job.id, kind))

        async def commit(conn: Any) -> None:
            await conn.execute(INSERT, (job.id, kind))

        return commit

    if kind.startswith("sync"):

        def sync_handler(ctx: JobContext, payload: Any) -> Any:
            started.set()
            assert gate.wait(10)
            return effect(ctx.job)

        return sync_handler

    async def async_handler(ctx: JobContext, payload: Any) -> Any:
        started.set()
        assert await asyncio.to_thread(gate.wait, 10)
        return effect(ctx.job)

    return async_handler


async def kinds_of(store: Store, job_id: UUID) -> list[str]:
    return [e.kind for e in await store.events(job_id)]


@pytest.mark.parametrize("kind", ["async-callback", "async-effect", "sync-callback", "sync-effect"])
async def test_a_cancel_requested_while_the_handler_runs_skips_its_effect(
    pool: Pool, effects_db: str, kind: str
) -> None:
    store = Store(pool)
    gate, started = threading.Event(), threading.Event()
    reg = Registry()
    reg.handler("gated")(_gated_handler(kind, gate, started))
    observed = Outcomes()
    job = await store.enqueue(NewJob(type="gated"))
    async with quiet_worker(store, reg, observed):
        assert await asyncio.to_thread(started.wait, 10)
        requested = await store.cancel(job.id)
        assert requested.state is JobState.LEASED and requested.cancel_requested
        gate.set()
        done = await wait_state(store, job.id, JobState.CANCELLED, JobState.SUCCEEDED)
    assert done.state is JobState.CANCELLED
    assert notes(effects_db) == {}
    assert not await store.effect_done(done)
    assert await kinds_of(store, job.id) == ["enqueued", "claimed", "cancel_requested", "cancelled"]
    assert observed.seen == {job.id: ["cancelled"]}


async def test_a_cancelled_job_in_a_worker_group_skips_only_its_own_effect(
    pool: Pool, effects_db: str
) -> None:
    store = Store(pool)
    gate = threading.Event()
    started = asyncio.Semaphore(0)
    reg = Registry()

    @reg.handler("gated")
    async def gated(ctx: JobContext, payload: Any) -> Callable[[Any], Awaitable[None]]:
        started.release()
        assert await asyncio.to_thread(gate.wait, 10)

        async def commit(conn: Any) -> None:
            await conn.execute(INSERT, (ctx.job.id, "callback"))

        return commit

    jobs = await store.enqueue_batch([NewJob(type="gated", payload={"i": i}) for i in range(4)])
    observed = Outcomes()
    async with quiet_worker(store, reg, observed):
        for _ in jobs:
            await asyncio.wait_for(started.acquire(), 10)
        await store.cancel(jobs[1].id)
        gate.set()
        ended = [
            await wait_state(store, j.id, JobState.CANCELLED, JobState.SUCCEEDED) for j in jobs
        ]
    assert [j.state for j in ended] == [
        JobState.SUCCEEDED,
        JobState.CANCELLED,
        JobState.SUCCEEDED,
        JobState.SUCCEEDED,
    ]
    assert notes(effects_db) == {j.id: "callback" for j in jobs if j.id != jobs[1].id}
    assert observed.seen[jobs[1].id] == ["cancelled"]


async def test_a_cancelled_job_in_a_completion_group_neither_commits_nor_blocks_the_rest(
    stores: Stores, effects_db: str
) -> None:
    store = await stores.make()
    jobs = await claimed_jobs(store, 4)
    calls: list[UUID] = []

    def callback(job: Job) -> Any:
        def run(conn: Any) -> Any:
            calls.append(job.id)
            return conn.execute(INSERT, (job.id, "function"))

        return run

    cancelled = {jobs[1].id, jobs[2].id}
    for job_id in cancelled:
        await store.cancel(job_id)
    outcomes = [
        Outcome(job=j, commit=Effect(INSERT, (j.id, "effect")) if i % 2 else callback(j))
        for i, j in enumerate(jobs)
    ]
    results = await store.record_outcomes("w1", outcomes)
    states = [r.state if isinstance(r, Job) else r for r in results]
    assert states == [
        JobState.SUCCEEDED,
        JobState.CANCELLED,
        JobState.CANCELLED,
        JobState.SUCCEEDED,
    ]
    assert notes(effects_db) == {jobs[0].id: "function", jobs[3].id: "effect"}
    assert calls == [jobs[0].id]
    assert [o.invocations for o in outcomes] == [1, 0, 0, 1]
    with psycopg.connect(effects_db) as conn:
        ledger = {r[0] for r in conn.execute("SELECT job_id FROM processed_effects")}
    assert ledger == {jobs[0].id, jobs[3].id}
