"""Results: what a handler returns is stored with its job's completion, read back
by ``Client.result``, woken by the completion's notification, and purged with
the job."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from jobrun import Client
from jobrun.domain import JobState, NewJob, Outcome, OutcomeKind, Result
from jobrun.errors import (
    InvalidJob,
    InvalidResult,
    JobNotFound,
    JobNotSucceeded,
    LeaseLost,
    ResultNotReady,
)
from jobrun.postgres import FinishWatcher, Pool, Store
from jobrun.registry import JobContext, Registry
from jobrun.results import ResultWaiter

LEASE = timedelta(minutes=5)


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def claim_one(store: Store, owner: str = "w1") -> Any:
    (job,) = await store.claim(["default"], owner, 1, LEASE)
    return job


async def test_a_result_is_stored_by_the_completion_and_read_back(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    before = await store.result_of(job.id)
    assert (before.state, before.value) == (JobState.QUEUED, None)
    held = await claim_one(store)
    value = {"rows": 12, "path": "a/../b,c", "text": "é"}
    (done,) = await store.record_outcomes("w1", [Outcome(job=held, result=_json(value))])
    assert not isinstance(done, Exception) and done.state is JobState.SUCCEEDED
    after = await store.result_of(job.id)
    assert (after.state, after.value, after.type) == (JobState.SUCCEEDED, value, "t")


async def test_a_result_travels_with_a_commit_callback_and_rolls_back_with_it(
    store: Store,
) -> None:
    good, bad = [await store.enqueue(NewJob(type="t")) for _ in range(2)]
    held = {j.id: j for j in await store.claim(["default"], "w1", 2, LEASE)}
    ran: list[str] = []

    async def fine(conn: Any) -> None:
        ran.append("fine")

    async def broken(conn: Any) -> None:
        raise RuntimeError("effect failed")

    results = await store.record_outcomes(
        "w1",
        [
            Outcome(job=held[good.id], commit=fine, result='"kept"'),
            Outcome(job=held[bad.id], commit=broken, result='"lost"'),
        ],
    )
    assert not isinstance(results[0], Exception)
    assert isinstance(results[1], RuntimeError)
    assert (await store.result_of(good.id)).value == "kept"
    # The failed callback's transaction rolled back: no completion, no result.
    lost = await store.result_of(bad.id)
    assert (lost.state, lost.value) == (JobState.LEASED, None)


async def test_a_cancel_requested_before_the_completion_wins_and_stores_nothing(
    store: Store,
) -> None:
    job = await store.enqueue(NewJob(type="t"))
    held = await claim_one(store)
    await store.cancel(job.id)
    (done,) = await store.record_outcomes("w1", [Outcome(job=held, result='{"x":1}')])
    assert not isinstance(done, Exception) and done.state is JobState.CANCELLED
    found = await store.result_of(job.id)
    assert (found.state, found.value) == (JobState.CANCELLED, None)


async def test_a_result_from_a_lost_lease_is_not_stored(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    held = await claim_one(store)
    (done,) = await store.record_outcomes("w2", [Outcome(job=held, result='"not mine"')])
    assert isinstance(done, LeaseLost)
    assert (await store.result_of(job.id)).value is None


async def test_a_failure_stores_no_result(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t", max_attempts=1))
    held = await claim_one(store)
    outcome = Outcome(job=held, kind=OutcomeKind.FAIL, detail="boom", result='"ignored"')
    (done,) = await store.record_outcomes("w1", [outcome])
    assert not isinstance(done, Exception) and done.state is JobState.DEAD
    found = await store.result_of(job.id)
    assert (found.state, found.value, found.error) == (JobState.DEAD, None, "boom")


async def test_a_purged_job_takes_its_result_with_it(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    held = await claim_one(store)
    await store.record_outcomes("w1", [Outcome(job=held, result="[1,2]")])
    assert await store.purge(timedelta(0)) == 1
    with pytest.raises(JobNotFound):
        await store.result_of(job.id)
    async with store.pool.connection() as conn:
        left = await (await conn.execute("SELECT count(*) FROM job_results")).fetchone()
    assert left == (0,)


async def test_reading_a_result_refuses_a_malformed_id(store: Store) -> None:
    with pytest.raises(InvalidJob, match="not-an-id"):
        await store.result_of("not-an-id")  # type: ignore[arg-type]


class CountedReads:
    """The store's result reads, each signalled: the test finishes a job only
    once the waiter has read it unfinished, so what wakes the waiter after that
    is the notification (or a poll), never a first read that came late."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.reads = 0
        self.read = asyncio.Event()

    async def result_of(self, job_id: Any) -> Any:
        found = await self.store.result_of(job_id)
        self.reads += 1
        self.read.set()
        return found


async def finish_after_read(
    reads: CountedReads,
    job_id: Any,
    result: str | None,
    outcome: OutcomeKind = OutcomeKind.COMPLETE,
) -> None:
    """Claim the job, wait for the waiter's first read, then record the outcome."""
    store = reads.store
    held = await claim_one(store)
    assert held.id == job_id
    await reads.read.wait()  # the caller cleared it before the waiter started
    await store.record_outcomes(
        "w1",
        [Outcome(job=held, kind=outcome, detail="ValueError: no such customer", result=result)],
    )


def watching(reads: CountedReads, db_url: str) -> ResultWaiter:
    # Polling every hour: only the notification can end a wait in time.
    return ResultWaiter(
        lambda: reads, lambda: FinishWatcher.start(db_url), Registry(), poll=timedelta(hours=1)
    )


async def test_a_wait_is_woken_by_the_completions_notification(store: Store, db_url: str) -> None:
    reads = CountedReads(store)
    waiter = watching(reads, db_url)
    try:
        job = await store.enqueue(NewJob(type="t"))
        reads.read.clear()
        began = time.monotonic()
        waiting = asyncio.create_task(waiter.result(job.id, wait=timedelta(seconds=60)))
        await finish_after_read(reads, job.id, '{"done":true}')
        assert await waiting == {"done": True}
        # Woken long before the wait ran out (and the hourly poll never ran):
        # a wait that missed the notification would end at its last read, at 60 s.
        assert time.monotonic() - began < 30
        assert reads.reads == 2  # the read before, and the one the notification caused
        # The negative control: a job that succeeds returning nothing is not
        # announced, so the same kind of wait lasts until its last read.
        quiet = await store.enqueue(NewJob(type="t"))
        reads.read.clear()
        began = time.monotonic()
        waiting = asyncio.create_task(waiter.result(quiet.id, wait=timedelta(seconds=6)))
        await finish_after_read(reads, quiet.id, None)
        assert await waiting is None
        assert time.monotonic() - began >= 5.9
        assert reads.reads == 4
    finally:
        await waiter.close()


async def test_a_wait_without_listen_finds_the_result_by_polling(store: Store) -> None:
    async def no_watcher() -> None:
        return None

    reads = CountedReads(store)
    waiter = ResultWaiter(lambda: reads, no_watcher, Registry(), poll=timedelta(milliseconds=20))
    job = await store.enqueue(NewJob(type="t"))
    reads.read.clear()
    waiting = asyncio.create_task(waiter.result(job.id, wait=timedelta(seconds=60)))
    await finish_after_read(reads, job.id, '"polled"')
    assert await waiting == "polled"
    await waiter.close()


async def test_a_dead_job_wakes_its_waiter_with_its_error(store: Store, db_url: str) -> None:
    reads = CountedReads(store)
    waiter = watching(reads, db_url)
    try:
        job = await store.enqueue(NewJob(type="t", max_attempts=1))
        reads.read.clear()
        waiting = asyncio.create_task(waiter.result(job.id, wait=timedelta(seconds=60)))
        began = time.monotonic()
        await finish_after_read(reads, job.id, None, OutcomeKind.FAIL)
        with pytest.raises(JobNotSucceeded) as caught:
            await waiting
        assert time.monotonic() - began < 30  # woken by the notification, not the last read
        assert str(caught.value) == f"job {job.id} ended dead: ValueError: no such customer"
        assert (caught.value.state, caught.value.job_id) == ("dead", job.id)
    finally:
        await waiter.close()


class Report(BaseModel):
    rows: int


async def test_client_result_reads_waits_and_types_the_value(db_url: str) -> None:
    registry = Registry()

    @registry.handler("report", result=Report)
    async def report(ctx: JobContext, payload: Any) -> Any:
        if payload == "both":
            return Result(Report(rows=3), commit=None)
        return {"rows": payload}

    @registry.handler("plain")
    async def plain(ctx: JobContext, payload: Any) -> Any:
        return {"rows": "many"}

    async with Client(registry, database_url=db_url, concurrency=2) as client:
        typed = await client.enqueue(NewJob(type="report", payload=7))
        both = await client.enqueue(NewJob(type="report", payload="both"))
        raw = await client.enqueue(NewJob(type="plain"))
        with pytest.raises(ResultNotReady, match=r"is queued, not finished$"):
            await client.result(typed.id)
        with pytest.raises(ValueError, match="wait must not be negative"):
            await client.result(typed.id, wait=-1)
        await client.run_worker(drain=True)
        assert await client.result(typed.id, wait=5) == Report(rows=7)
        assert await client.result(str(both.id)) == Report(rows=3)
        assert await client.result(raw.id) == {"rows": "many"}
        with pytest.raises(InvalidResult, match=f"result of job {raw.id} does not validate"):
            await client.result(raw.id, model=Report)
        with pytest.raises(JobNotFound):
            await client.result("0190b3c4-0000-7000-8000-000000000000", wait=1)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def test_sync_client_result_polls_until_the_job_finishes(db_url: str) -> None:
    from jobrun import SyncClient

    registry = Registry()

    @registry.handler("sum")
    def add(ctx: JobContext, payload: Any) -> Any:
        return sum(payload)

    async def run_worker() -> None:
        async with Client(registry, database_url=db_url) as client:
            await client.run_worker(drain=True)

    with SyncClient(registry, database_url=db_url) as client:
        job = client.enqueue(NewJob(type="sum", payload=[1, 2, 3]))
        with pytest.raises(ResultNotReady, match=r"is queued, not finished after waiting 0\.2s"):
            client.result(job.id, wait=0.2)
        asyncio.run(run_worker())
        assert client.result(job.id, wait=5) == 6
        assert client.result(str(job.id)) == 6
