"""The worker against the real store on PostgreSQL: every outcome of a job's attempt."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from pydantic import BaseModel

from jobrun.config import Config
from jobrun.domain import Backoff, BackoffKind, Job, JobState, NewJob, Outcome
from jobrun.postgres import Pool
from jobrun.postgres.notify import Notifier
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry, Snooze
from jobrun.testing import eventually
from jobrun.worker import Worker

FAST_RETRY = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=50))


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


def make_worker(
    store: Store,
    reg: Registry,
    *,
    dispatcher: Notifier | None = None,
    owner: str | None = None,
    **settings: Any,
) -> Worker:
    """A worker with quick test settings (``settings`` are :class:`Config` fields)."""
    settings.setdefault("concurrency", 10)
    settings.setdefault("poll", timedelta(milliseconds=50))
    settings.setdefault("lease", timedelta(seconds=3))
    settings.setdefault("heartbeat_every", timedelta(milliseconds=100))
    settings.setdefault("reap_every", timedelta(milliseconds=200))
    settings.setdefault("shutdown_grace", timedelta(seconds=5))
    return Worker(store, reg, Config(**settings), dispatcher=dispatcher, owner=owner)


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[asyncio.Event]:
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


async def wait_state(store: Store, job_id: UUID, *states: JobState, within: float = 10.0) -> Job:
    found: list[Job] = []

    async def check() -> bool:
        job = await store.get(job_id)
        found[:] = [job]
        return job.state in states

    try:
        await eventually(check, within=within)
    except AssertionError:
        raise AssertionError(f"job stayed {found[0].state}, wanted {states}") from None
    return found[0]


async def test_a_job_runs_and_succeeds(store: Store) -> None:
    reg = Registry()
    seen: list[tuple[Any, int]] = []

    @reg.handler("greet")
    async def greet(ctx: JobContext, payload: Any) -> None:
        seen.append((payload, ctx.attempt))

    job = await store.enqueue(NewJob(type="greet", payload={"name": "ada"}))
    async with running(make_worker(store, reg)):
        done = await wait_state(store, job.id, JobState.SUCCEEDED)
    assert seen == [({"name": "ada"}, 1)]
    assert done.attempts == 1
    assert done.lease_owner is None


async def test_an_exception_retries_with_backoff_then_ends_dead(store: Store) -> None:
    reg = Registry()
    starts: list[float] = []

    @reg.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        starts.append(time.monotonic())
        raise RuntimeError(f"boom on attempt {ctx.attempt}")

    backoff = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=300))
    job = await store.enqueue(NewJob(type="flaky", max_attempts=3, backoff=backoff))
    async with running(make_worker(store, reg)):
        dead = await wait_state(store, job.id, JobState.DEAD)
    assert dead.attempts == 3
    assert dead.last_error is not None
    assert "RuntimeError: boom on attempt 3" in dead.last_error
    assert len(starts) == 3
    # Each retry waited for the job's backoff (database time, so allow scheduling slack).
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert all(gap >= 0.25 for gap in gaps), gaps
    kinds = [e.kind for e in await store.events(job.id)]
    assert kinds == ["enqueued"] + ["claimed", "failed"] * 2 + ["claimed", "dead"]


async def test_a_sync_handler_runs_in_a_thread(store: Store) -> None:
    reg = Registry()
    threads: list[str] = []

    @reg.handler("blocking")
    def blocking(ctx: JobContext, payload: Any) -> None:
        time.sleep(0.05)
        threads.append(threading.current_thread().name)

    job = await store.enqueue(NewJob(type="blocking"))
    async with running(make_worker(store, reg)):
        await wait_state(store, job.id, JobState.SUCCEEDED)
    assert len(threads) == 1
    assert threads[0] != threading.main_thread().name


async def test_a_commit_callback_write_commits_exactly_once(store: Store, pool: Pool) -> None:
    async with pool.connection() as conn:
        await conn.execute("CREATE TABLE effects (job_id uuid PRIMARY KEY, n int NOT NULL)")
    reg = Registry()

    class Payload(BaseModel):
        n: int

    @reg.handler("write", payload=Payload)
    async def write(ctx: JobContext, payload: Payload) -> Callable[[Any], Awaitable[None]]:
        async def commit(conn: Any) -> None:
            await conn.execute(
                "INSERT INTO effects (job_id, n) VALUES (%s, %s)", (ctx.job.id, payload.n)
            )

        return commit

    jobs = await store.enqueue_batch([reg.new_job("write", Payload(n=i)) for i in range(20)])
    async with running(make_worker(store, reg)):
        for job in jobs:
            await wait_state(store, job.id, JobState.SUCCEEDED)
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT job_id, n FROM effects ORDER BY n")
        rows = await cur.fetchall()
    assert [r[1] for r in rows] == list(range(20))
    assert {r[0] for r in rows} == {j.id for j in jobs}
    assert all([await store.effect_done(j) for j in jobs])


async def test_a_failing_commit_callback_rolls_back_and_retries(store: Store, pool: Pool) -> None:
    async with pool.connection() as conn:
        await conn.execute("CREATE TABLE effects (job_id uuid, attempt int)")
    reg = Registry()

    @reg.handler("half")
    async def half(ctx: JobContext, payload: Any) -> Callable[[Any], Awaitable[None]]:
        async def commit(conn: Any) -> None:
            await conn.execute("INSERT INTO effects VALUES (%s, %s)", (ctx.job.id, ctx.attempt))
            if ctx.attempt == 1:
                raise ValueError("commit failed after writing")

        return commit

    job = await store.enqueue(NewJob(type="half", backoff=FAST_RETRY))
    async with running(make_worker(store, reg)):
        done = await wait_state(store, job.id, JobState.SUCCEEDED)
    assert done.attempts == 2
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT attempt FROM effects")
        assert await cur.fetchall() == [(2,)]


async def test_cancel_reaches_a_running_async_handler(store: Store) -> None:
    reg = Registry()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    @reg.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job = await store.enqueue(NewJob(type="long"))
    async with running(make_worker(store, reg)):
        await asyncio.wait_for(started.wait(), 5)
        await store.cancel(job.id)
        await asyncio.wait_for(cancelled.wait(), 5)
        done = await wait_state(store, job.id, JobState.CANCELLED)
    assert done.finished_at is not None


async def test_cancel_reaches_a_running_sync_handler_through_its_token(store: Store) -> None:
    reg = Registry()
    started = threading.Event()
    saw: list[str | None] = []

    @reg.handler("spin")
    def spin(ctx: JobContext, payload: Any) -> None:
        started.set()
        deadline = time.monotonic() + 30
        while not ctx.token.wait(0.01) and time.monotonic() < deadline:
            pass
        saw.append(ctx.token.reason if ctx.cancelled else None)

    job = await store.enqueue(NewJob(type="spin"))
    async with running(make_worker(store, reg)):
        await asyncio.to_thread(started.wait, 5)
        await store.cancel(job.id)
        await wait_state(store, job.id, JobState.CANCELLED)
    assert saw == ["cancelled"]


async def test_an_attempt_past_its_timeout_fails_with_a_timeout_error(store: Store) -> None:
    reg = Registry()
    tokens: list[bool] = []

    @reg.handler("slow", timeout=0.2)
    async def slow(ctx: JobContext, payload: Any) -> None:
        try:
            await asyncio.sleep(30)
        finally:
            tokens.append(ctx.cancelled)

    job = await store.enqueue(NewJob(type="slow", max_attempts=2, backoff=FAST_RETRY))
    async with running(make_worker(store, reg)):
        dead = await wait_state(store, job.id, JobState.DEAD)
    assert dead.attempts == 2
    assert dead.last_error == "timed out: the attempt exceeded 0.2s"
    assert tokens == [True, True]


async def test_worker_job_timeout_applies_to_sync_handlers(store: Store) -> None:
    reg = Registry()

    @reg.handler("sleepy")
    def sleepy(ctx: JobContext, payload: Any) -> None:
        ctx.token.wait(5)

    job = await store.enqueue(NewJob(type="sleepy", max_attempts=1))
    async with running(make_worker(store, reg, job_timeout=timedelta(milliseconds=200))):
        dead = await wait_state(store, job.id, JobState.DEAD)
    assert dead.last_error == "timed out: the attempt exceeded 0.2s"


async def test_an_unknown_type_fails_with_a_clear_error(store: Store) -> None:
    job = await store.enqueue(NewJob(type="nobody_handles_this", max_attempts=1))
    async with running(make_worker(store, Registry())):
        dead = await wait_state(store, job.id, JobState.DEAD)
    # The cause first, then the bounded policy it failed on (issue 27, item 10).
    assert dead.last_error is not None
    assert dead.last_error.startswith(
        "no handler is registered for job type 'nobody_handles_this' "
        "(this worker cannot run the job: attempt 1 of at most 1,"
    ), dead.last_error


async def test_a_payload_that_does_not_validate_fails_without_running(store: Store) -> None:
    reg = Registry()
    ran: list[Any] = []

    class Email(BaseModel):
        to: str

    @reg.handler("email", payload=Email)
    async def email(ctx: JobContext, payload: Email) -> None:
        ran.append(payload)

    job = await store.enqueue(
        NewJob(type="email", payload={"too": "x"}, max_attempts=2, backoff=FAST_RETRY)
    )
    # Retried on the policy for jobs a worker cannot run, not the job's backoff.
    async with running(make_worker(store, reg, unrunnable_retry=timedelta(milliseconds=50))):
        dead = await wait_state(store, job.id, JobState.DEAD)
    assert ran == []
    assert dead.attempts == 2
    assert dead.last_error is not None
    assert "payload of job type 'email' does not validate" in dead.last_error
    assert "to: Field required" in dead.last_error


async def test_graceful_shutdown_finishes_quick_jobs_and_hands_back_the_rest(
    store: Store,
) -> None:
    reg = Registry()
    started: set[str] = set()
    release_sync, sync_returned = threading.Event(), threading.Event()

    @reg.handler("quick")
    async def quick(ctx: JobContext, payload: Any) -> None:
        started.add("quick")
        await asyncio.sleep(0.3)

    @reg.handler("stuck")
    async def stuck(ctx: JobContext, payload: Any) -> None:
        started.add("stuck")
        await asyncio.sleep(60)

    @reg.handler("stuck_sync")
    def stuck_sync(ctx: JobContext, payload: Any) -> None:
        started.add("stuck_sync")
        release_sync.wait(60)  # ignores its token: the worker must not wait for it
        sync_returned.set()

    a = await store.enqueue(NewJob(type="quick"))
    b = await store.enqueue(NewJob(type="stuck"))
    c = await store.enqueue(NewJob(type="stuck_sync"))
    worker = make_worker(store, reg, shutdown_grace=timedelta(milliseconds=800))
    stop = asyncio.Event()
    task = asyncio.create_task(worker.run(stop))

    async def all_started() -> bool:
        return len(started) == 3

    await eventually(all_started)
    stop.set()
    try:
        # Far sooner than the stuck handlers would end (60 s): the grace period
        # and the token's notice were all it waited, and the worker returned
        # while the sync handler's thread still ran.
        await asyncio.wait_for(task, 10)
        assert not sync_returned.is_set()
    finally:
        release_sync.set()
    assert (await store.get(a.id)).state is JobState.SUCCEEDED
    back = await store.get(b.id)
    assert back.state is JobState.QUEUED
    assert back.lease_owner is None
    assert back.attempts == 0  # handed back: the attempt is not counted
    assert back.last_error is not None
    assert "handed back" in back.last_error
    # The sync handler's thread still runs: handing its job back would let
    # another worker start it meanwhile, so it is left leased for the reaper.
    left = await store.get(c.id)
    assert left.state is JobState.LEASED and left.lease_owner == worker.owner
    assert left.attempts == 1
    claimed = await store.claim(["default"], "next", 10, timedelta(seconds=5))
    assert [j.id for j in claimed] == [b.id]
    # When the thread finally returns, nothing reports its result.
    assert await asyncio.to_thread(sync_returned.wait, 10)
    assert (await store.get(c.id)).state is JobState.LEASED


async def test_a_second_stop_request_skips_the_grace_period(store: Store) -> None:
    reg = Registry()
    started = asyncio.Event()

    @reg.handler("stuck")
    async def stuck(ctx: JobContext, payload: Any) -> None:
        started.set()
        await asyncio.sleep(60)

    job = await store.enqueue(NewJob(type="stuck"))
    worker = make_worker(store, reg, shutdown_grace=timedelta(seconds=30))
    worker.signals.init()
    task = asyncio.create_task(worker.run())
    await asyncio.wait_for(started.wait(), 5)
    worker.request_stop()
    # The claim loop has ended and the grace period waits for the stuck job.
    assert await worker.signals.draining.wait() == 1
    assert not task.done()
    worker.request_stop(graceful=False)
    await asyncio.wait_for(task, 5)
    assert (await store.get(job.id)).state is JobState.QUEUED


async def test_the_built_in_reaper_requeues_an_expired_lease(store: Store) -> None:
    reg = Registry()

    @reg.handler("orphan")
    async def orphan(ctx: JobContext, payload: Any) -> None:
        return None

    job = await store.enqueue(NewJob(type="orphan", backoff=FAST_RETRY))
    (claimed,) = await store.claim(["default"], "dead-worker", 1, timedelta(milliseconds=100))
    assert claimed.id == job.id
    async with running(make_worker(store, reg)):
        done = await wait_state(store, job.id, JobState.SUCCEEDED)
    assert done.attempts == 2


async def test_a_notification_wakes_an_idle_worker(store: Store, db_url: str) -> None:
    reg = Registry()
    ran = asyncio.Event()

    @reg.handler("ping")
    async def ping(ctx: JobContext, payload: Any) -> None:
        ran.set()

    async with Notifier(db_url) as notifier:
        worker = make_worker(store, reg, dispatcher=notifier, poll=timedelta(seconds=60))
        worker.signals.init()
        async with running(worker):
            # Idle on the dispatcher: without a notification, its next claim is 60 s away.
            await worker.signals.idle.wait_for(lambda waits_for: waits_for == "notification")
            await store.enqueue(NewJob(type="ping"))
            # So a run within half the poll was started by the notification.
            await asyncio.wait_for(ran.wait(), 30)


async def test_many_jobs_complete_in_groups(store: Store) -> None:
    reg = Registry()

    @reg.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        return None

    await store.enqueue_batch([NewJob(type="noop") for _ in range(2000)])
    worker = make_worker(store, reg, concurrency=100)
    async with running(worker):

        async def drained() -> bool:
            depth = await store.depth()
            return sum(d.count for d in depth if d.state is JobState.SUCCEEDED) == 2000

        await eventually(drained, within=30)
    assert worker.stats.batches < 2000 / 5


async def test_completer_counts_callbacks_run_again_after_a_group_rollback(
    store: Store, pool: Pool
) -> None:
    from jobrun.worker import Completer

    async with pool.connection() as conn:
        await conn.execute("CREATE TABLE effect_rows (job_id uuid NOT NULL)")
    for _ in range(3):
        await store.enqueue(NewJob(type="t"))
    claimed = await store.claim(["default"], "w1", 3, timedelta(seconds=30))
    calls: list[UUID] = []

    def effect(job: Job, *, fail: bool = False) -> Any:
        async def commit(conn: Any) -> None:
            calls.append(job.id)
            if fail:
                raise RuntimeError("effect failed")
            await conn.execute("INSERT INTO effect_rows (job_id) VALUES (%s)", (job.id,))

        return commit

    completer = Completer(store, "w1")
    # Submitted before the completer runs, so the three form one group.
    futures = [
        completer.submit(Outcome(job=claimed[0], commit=effect(claimed[0]))),
        completer.submit(Outcome(job=claimed[1], commit=effect(claimed[1], fail=True))),
        completer.submit(Outcome(job=claimed[2], commit=effect(claimed[2]))),
    ]
    completer.close()
    await completer.run()
    results = [f.result() for f in futures]
    assert isinstance(results[0], Job) and isinstance(results[2], Job)
    assert isinstance(results[1], RuntimeError)
    # The first callback ran in the rolled-back group and again without the
    # failing one; that one extra call is what the statistics report.
    assert calls.count(claimed[0].id) == 2
    assert completer.stats.callback_reinvocations == 1
    assert completer.stats.batches == 1 and completer.stats.jobs == 3
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM effect_rows")
        row = await cur.fetchone()
    assert row is not None and row[0] == 2


async def test_a_job_snoozed_without_delay_is_claimed_again_at_once_and_runs(
    store: Store, pool: Pool, caplog: pytest.LogCaptureFixture
) -> None:
    # A snooze (or a retry) with no delay queues the job again in the same
    # commit that records the outcome, so the next claim can hand it back to
    # this worker before the finished run has left its table. The new attempt
    # must start once the old one is gone, not be refused and left leased.
    reg = Registry()
    rounds: dict[UUID, int] = {}

    @reg.handler("again")
    async def again(ctx: JobContext, payload: Any) -> None:
        rounds[ctx.job.id] = rounds.get(ctx.job.id, 0) + 1
        if rounds[ctx.job.id] < 6:
            raise Snooze(timedelta(0))

    @reg.handler("tick")
    async def tick(ctx: JobContext, payload: Any) -> None:
        await asyncio.sleep(payload["ms"] / 1000)

    class SlowToHearBack(Store):
        # The outcome commits, then its caller hears of it late: the window in
        # which a claim can return the job to this worker grows from microseconds.
        async def record_outcomes(self, *args: Any, **kw: Any) -> Any:
            results = await super().record_outcomes(*args, **kw)
            await asyncio.sleep(0.02)
            return results

    slow = SlowToHearBack(pool)
    # Short jobs of other kinds end while the snoozes are being recorded; each
    # frees a slot and so sends a claim into that window.
    await slow.enqueue_batch(
        [NewJob(type="again") for _ in range(4)]
        + [NewJob(type="tick", payload={"ms": i % 7}) for i in range(300)]
    )
    worker = make_worker(slow, reg, concurrency=8, lease=timedelta(seconds=30))
    stop = asyncio.Event()
    await asyncio.wait_for(worker.run(stop, drain=True), 60)
    counts = {(d.state, d.count) for d in await store.depth()}
    assert counts == {(JobState.SUCCEEDED, 304)}
    assert "claimed again" not in caplog.text
    assert sorted(set(rounds.values())) == [6]


async def test_a_drain_claims_again_when_an_outcome_commits_while_its_claim_runs(
    store: Store, pool: Pool
) -> None:
    # The last running job snoozes (due again at once) while a claim is in
    # flight: the claim's snapshot predates the snooze, so it finds nothing,
    # and by the time it returns the job has left the worker. A drain that
    # called the queues empty then would exit with a due job still queued.
    reg = Registry()
    runs: list[int] = []
    snoozing = asyncio.Event()

    @reg.handler("later")
    async def later(ctx: JobContext, payload: Any) -> None:
        runs.append(ctx.attempt)
        if len(runs) == 1:
            snoozing.set()
            raise Snooze(timedelta(0))

    reporting, claim_read, committed = asyncio.Event(), asyncio.Event(), asyncio.Event()

    class ClaimAcrossTheSnooze(Store):
        async def record_outcomes(self, *args: Any, **kw: Any) -> Any:
            if committed.is_set():
                return await super().record_outcomes(*args, **kw)
            reporting.set()
            await claim_read.wait()  # the claim below has taken its snapshot
            results = await super().record_outcomes(*args, **kw)
            committed.set()
            return results

        async def claim(self, *args: Any, **kw: Any) -> Any:
            jobs = await super().claim(*args, **kw)
            if snoozing.is_set() and not claim_read.is_set():
                await asyncio.wait_for(reporting.wait(), 10)
                claim_read.set()
                await asyncio.wait_for(committed.wait(), 10)
                # Let the job's task finish leaving the worker before this
                # claim's empty result is seen.
                await eventually(lambda: worker.running == 0, what="the job left the worker")
            return jobs

    wrapped = ClaimAcrossTheSnooze(pool)
    job = await wrapped.enqueue(NewJob(type="later"))
    worker = make_worker(wrapped, reg, concurrency=4, lease=timedelta(seconds=30))
    await asyncio.wait_for(worker.run(asyncio.Event(), drain=True), 30)
    assert claim_read.is_set(), "the claim never ran across the snooze"
    assert (await store.get(job.id)).state is JobState.SUCCEEDED
    assert len(runs) == 2
