"""The Store contract, one named test per guarantee, on a real PostgreSQL database.

These tests drive :class:`~jobrun.postgres.store.Store`. scripts/async-to-sync
converts this module into ``test_store_sync.py``, the same tests against the
generated synchronous store, as it converts the store itself. The few tests
that need an async caller connection are left out of the twin
(``# sync: skip``); their sync counterparts are in ``test_sync_producer.py``.
"""

from __future__ import annotations

import asyncio  # sync: skip
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any
from uuid import UUID, uuid4

import psycopg
import pytest
from psycopg import sql
from pydantic import BaseModel, Field

from jobrun.domain import (
    MAX_ATTEMPTS_LIMIT,
    MAX_DELAY,
    MAX_PRIORITY,
    MIN_PRIORITY,
    Backoff,
    BackoffKind,
    EventMode,
    Job,
    JobFilter,
    JobState,
    NewJob,
    NewSchedule,
    Outcome,
    OutcomeKind,
    SchedulePatch,
)
from jobrun.errors import (
    CommitTimeout,
    ConfigurationError,
    ConfirmationNeeded,
    IdempotencyConflict,
    InvalidJob,
    InvalidSchedule,
    InvalidTransition,
    JobNotFound,
    LeaseLost,
    PayloadTooLarge,
    ScheduleNotFound,
)
from jobrun.postgres import Pool, open_pool
from jobrun.postgres.pool import open_sync_pool  # sync: skip
from jobrun.postgres.store import Store
from jobrun.postgres.store_core import COPY_CHUNK, COPY_SLICE
from jobrun.testing import eventually

LEASE = timedelta(seconds=30)


class Stores:
    """Makes stores under test, on pools closed after the test."""

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self._shared: Pool | None = None
        self._pools: list[Pool] = []

    async def _pool(self, own: bool) -> Pool:
        if not own and self._shared is not None:
            return self._shared
        if True:  # sync: else
            pool = await open_pool(self.db_url, worker_concurrency=1 if own else 2)
        else:
            # Threads share a sync pool: room for eight claimers and a reaper.
            pool = open_sync_pool(self.db_url, max_size=3 if own else 10)
        self._pools.append(pool)
        if not own:
            self._shared = pool
        return pool

    async def make(self, *, own_pool: bool = False, **options: Any) -> Store:
        """A store with ``options``, on the test's shared pool or (``own_pool``) a new one."""
        return Store(await self._pool(own_pool), **options)

    async def close(self) -> None:
        for pool in self._pools:
            await pool.close()


@pytest.fixture
async def stores(db_url: str) -> AsyncIterator[Stores]:
    made = Stores(db_url)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def store(stores: Stores) -> Store:
    return await stores.make()


@pytest.fixture
async def async_store(pool: Pool) -> Store:  # sync: skip
    return Store(pool)


async def concurrently(*calls: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Run ``calls`` at the same time and return their results, in order."""
    if True:  # sync: else
        return list(await asyncio.gather(*(call() for call in calls)))
    else:
        with ThreadPoolExecutor(len(calls)) as threads:
            return list(threads.map(lambda call: call(), calls))


async def leases_ended(store: Store, *jobs: Job) -> None:
    """Wait until the database clock is past the lease end of every job of ``jobs``."""
    ends = [j.lease_expires_at for j in jobs if j.lease_expires_at is not None]
    assert len(ends) == len(jobs), jobs
    last = max(ends)

    async def past() -> bool:
        return await store.now() > last

    await eventually(past, what=f"the database clock to pass {last}")


@pytest.fixture
def listener(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    conn = psycopg.connect(db_url, autocommit=True)
    conn.execute("LISTEN jobrun")
    try:
        yield conn
    finally:
        conn.close()


def notified(conn: psycopg.Connection[Any], timeout: float = 0.5) -> list[str]:
    """The payloads of the notifications that arrive within ``timeout`` seconds."""
    return [n.payload for n in conn.notifies(timeout=timeout)]


def count_rows(db_url: str, table: str = "jobs") -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        (count,) = row.fetchone() or (0,)
    return int(count)


@pytest.fixture
async def effects_table(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE effect_rows (job_id uuid NOT NULL, note text)")
    return db_url


def effect_rows(db_url: str) -> list[UUID]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT job_id FROM effect_rows ORDER BY job_id")]


class Effect:
    """A commit callback: run ``statements``, then raise ``raises``."""

    def __init__(
        self, *statements: tuple[str, tuple[Any, ...] | None], raises: Exception | None = None
    ) -> None:
        self.statements = statements
        self.raises = raises

    async def __call__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        for query, params in self.statements:
            await conn.execute(query, params)  # type: ignore[arg-type]
        if self.raises is not None:
            raise self.raises


def effect_insert(job: Job, note: str = "done") -> tuple[str, tuple[Any, ...]]:
    return "INSERT INTO effect_rows (job_id, note) VALUES (%s, %s)", (job.id, note)


def write_effect(job: Job, note: str = "done") -> Effect:
    return Effect(effect_insert(job, note))


async def claim_one(
    store: Store, owner: str = "w1", queue: str = "default", *, now: datetime | None = None
) -> Job:
    (job,) = await store.claim([queue], owner, 1, LEASE, now=now)
    return job


# -- enqueue ---------------------------------------------------------------------------


async def test_enqueue_stores_a_queued_job_with_its_event(store: Store) -> None:
    new = NewJob(type="email", payload={"to": "a@example.com"}, queue="mail", priority=3)
    job = await store.enqueue(new)
    assert job.id == new.id
    assert job.state is JobState.QUEUED
    assert job.attempts == 0
    assert job.priority == 3
    assert (job.queue, job.payload) == ("mail", {"to": "a@example.com"})
    assert job.created_at.utcoffset() == timedelta(0)
    assert job.run_at.utcoffset() == timedelta(0)
    assert await store.get(job.id) == job
    (event,) = await store.events(job.id)
    assert (event.kind, event.from_state, event.to_state) == ("enqueued", None, JobState.QUEUED)


async def test_enqueue_returns_exactly_the_stored_job(store: Store) -> None:
    # The single insert reads back only run_at and created_at; every other field
    # of the returned Job is built from what was sent and must match the row.
    now = await store.now()
    for new in (
        NewJob(type="a", payload=[1, "two", {"3": None}], queue="q", priority=-5),
        NewJob(type="b", payload={"n": 1.5, "s": "é"}, delay=timedelta(minutes=3)),
        NewJob(
            type="c",
            payload="text",
            run_at=now + timedelta(days=1),
            max_attempts=7,
            backoff=Backoff(kind=BackoffKind.LINEAR, base=timedelta(seconds=9)),
            idempotency_key="key-c",
        ),
    ):
        job = await store.enqueue(new)
        assert job == await store.get(new.id)
        assert job.meta == {} and job.updated_at == job.created_at


async def test_enqueue_run_at_defaults_to_database_now_plus_delay(store: Store) -> None:
    before = await store.now()
    job = await store.enqueue(NewJob(type="t", delay=timedelta(hours=1)))
    assert before + timedelta(hours=1) <= job.run_at <= before + timedelta(hours=1, seconds=5)
    assert job.run_at - job.created_at == timedelta(hours=1)
    assert await store.claim(["default"], "w1", 10, LEASE) == []


async def test_listener_is_not_woken_before_the_job_is_visible(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    store = async_store
    listener = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    await listener.execute("LISTEN jobrun")
    async with await psycopg.AsyncConnection.connect(db_url) as producer:
        job = await store.enqueue(NewJob(type="t"), conn=producer)
        # Not committed yet: nothing may arrive.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.3):
                async for _ in listener.notifies():
                    break
        await producer.commit()
    async with asyncio.timeout(5):
        async for note in listener.notifies():
            assert note.payload == "default"
            break
    # Woken: the job must be visible to a fresh reader right now.
    assert (await store.get(job.id)).state is JobState.QUEUED
    await listener.close()


async def test_transactional_enqueue_rolled_back_leaves_no_job_and_no_notification(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    store = async_store
    listener = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    await listener.execute("LISTEN jobrun")
    async with await psycopg.AsyncConnection.connect(db_url) as producer:
        job = await store.enqueue(NewJob(type="t"), conn=producer)
        await producer.rollback()
    with pytest.raises(JobNotFound):
        await store.get(job.id)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            async for _ in listener.notifies():
                break
    await listener.close()


async def test_transactional_enqueue_commits_with_the_callers_row(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    store = async_store
    async with await psycopg.AsyncConnection.connect(db_url) as producer:
        await producer.execute("CREATE TABLE orders (id int)")
        await producer.commit()
        await producer.execute("INSERT INTO orders VALUES (1)")
        job = await store.enqueue(NewJob(type="ship", payload={"order": 1}), conn=producer)
        await producer.commit()
    assert (await store.get(job.id)).payload == {"order": 1}


async def test_idempotent_replay_returns_stored_job(store: Store) -> None:
    first = await store.enqueue(
        NewJob(type="t", payload={"a": 1, "b": [1, 2]}, idempotency_key="k")
    )
    replay = NewJob(type="t", payload={"b": [1, 2], "a": 1}, idempotency_key="k")
    again = await store.enqueue(replay)
    assert again.id == first.id
    assert again.id != replay.id
    assert again == await store.get(first.id)
    assert (await store.list_jobs()).jobs == [first]


async def test_idempotency_conflict_on_different_body(store: Store) -> None:
    first = await store.enqueue(NewJob(type="t", payload={"a": 1}, idempotency_key="k"))
    with pytest.raises(IdempotencyConflict) as caught:
        await store.enqueue(NewJob(type="t", payload={"a": 2}, idempotency_key="k"))
    assert caught.value.existing_id == first.id
    with pytest.raises(IdempotencyConflict):
        await store.enqueue(NewJob(type="t", payload={"a": 1}, idempotency_key="k", priority=5))
    assert (await store.list_jobs()).jobs == [first]
    # The same key in another queue is another job.
    other = await store.enqueue(
        NewJob(type="t", payload={"a": 2}, idempotency_key="k", queue="other")
    )
    assert other.id != first.id


async def test_invalid_payloads_are_refused_and_nothing_is_written(stores: Stores) -> None:
    class Email(BaseModel):
        to: str

    store = await stores.make(payload_models={"email": Email}, max_payload_bytes=64)
    with pytest.raises(InvalidJob, match=r"nan|JSON"):
        await store.enqueue(NewJob(type="t", payload={"x": float("nan")}))
    with pytest.raises(PayloadTooLarge, match=r"64-byte"):
        await store.enqueue(NewJob(type="t", payload={"x": "y" * 100}))
    with pytest.raises(InvalidJob, match="to"):
        await store.enqueue(NewJob(type="email", payload={"too": 1}))
    with pytest.raises(InvalidJob):
        await store.enqueue_batch([NewJob(type="t"), NewJob(type="email", payload={})])
    assert (await store.list_jobs()).jobs == []
    job = await store.enqueue(NewJob(type="email", payload={"to": "x"}))
    assert job.payload == {"to": "x"}


async def test_enqueue_notifies_its_queue_on_commit(
    store: Store, listener: psycopg.Connection[Any]
) -> None:
    await store.enqueue(NewJob(type="t", queue="q1"))
    assert notified(listener) == ["q1"]


async def test_notify_channel_is_configurable(
    stores: Stores, listener: psycopg.Connection[Any]
) -> None:
    listener.execute("LISTEN other")
    store = await stores.make(notify_channel="other")
    await store.enqueue(NewJob(type="t", queue="q2"))
    got = list(listener.notifies(timeout=0.5))
    assert [(n.channel, n.payload) for n in got] == [("other", "q2")]


async def test_replay_does_not_notify(store: Store, listener: psycopg.Connection[Any]) -> None:
    await store.enqueue(NewJob(type="t", idempotency_key="k"))
    assert notified(listener) == ["default"]
    await store.enqueue(NewJob(type="t", idempotency_key="k"))
    assert notified(listener) == []


class Invoice(BaseModel):
    customer: str
    amount: int = Field(ge=0)
    currency: str = "EUR"


async def test_typed_payload_is_stored_normalised(stores: Stores) -> None:
    store = await stores.make(payload_models={"invoice": Invoice})
    job = await store.enqueue(NewJob(type="invoice", payload={"customer": "c1", "amount": "12"}))
    assert job.payload == {"customer": "c1", "amount": 12, "currency": "EUR"}
    assert (await store.get(job.id)).payload == job.payload
    # Other types are not checked.
    await store.enqueue(NewJob(type="other", payload={"amount": "x"}))
    # A replay compares the normalised payloads.
    keyed = NewJob(type="invoice", payload={"customer": "c", "amount": 1}, idempotency_key="i")
    first = await store.enqueue(keyed)
    again = await store.enqueue(
        NewJob(
            type="invoice",
            payload={"customer": "c", "amount": "1", "currency": "EUR"},
            idempotency_key="i",
        )
    )
    assert again == first


async def test_invalid_typed_payload_names_the_field_and_writes_nothing(
    stores: Stores, db_url: str
) -> None:
    store = await stores.make(payload_models={"invoice": Invoice})
    with pytest.raises(InvalidJob, match="amount") as caught:
        await store.enqueue(NewJob(type="invoice", payload={"customer": "c1", "amount": -3}))
    assert "Invoice" in str(caught.value)
    with pytest.raises(InvalidJob, match="customer"):
        await store.enqueue_batch(
            [NewJob(type="other"), NewJob(type="invoice", payload={"amount": 1})]
        )
    assert count_rows(db_url) == 0


async def test_non_json_payload_is_refused(store: Store, db_url: str) -> None:
    with pytest.raises(InvalidJob, match="not valid JSON"):
        await store.enqueue(NewJob(type="t", payload={"x": float("inf")}))
    # A payload that bypassed NewJob's own validation is still caught.
    sneaky = NewJob.model_construct(
        type="t",
        payload={"s": {1, 2}},
        queue="default",
        priority=0,
        max_attempts=3,
        backoff=NewJob(type="t").backoff,
        run_at=None,
        delay=None,
        idempotency_key=None,
        id=uuid4(),
    )
    with pytest.raises(InvalidJob, match="'t' is not valid JSON"):
        await store.enqueue(sneaky)
    with pytest.raises(InvalidJob, match="NUL"):
        await store.enqueue(NewJob(type="t", payload="a\x00b"))
    assert count_rows(db_url) == 0


async def test_oversize_payload_is_refused(stores: Stores, db_url: str) -> None:
    store = await stores.make(max_payload_bytes=1000)
    await store.enqueue(NewJob(type="t", payload="x" * 900))
    with pytest.raises(PayloadTooLarge, match="over the 1000-byte limit"):
        await store.enqueue(NewJob(type="big", payload="x" * 1000))
    with pytest.raises(PayloadTooLarge, match="'big'"):
        await store.enqueue_batch([NewJob(type="t"), NewJob(type="big", payload=["é" * 600])])
    assert count_rows(db_url) == 1


# -- batch -----------------------------------------------------------------------------


async def test_enqueue_batch_inserts_in_order_with_events(store: Store) -> None:
    jobs = [NewJob(type="t", payload={"i": i}, queue=f"q{i % 3}") for i in range(250)]
    results = await store.enqueue_batch(jobs)
    assert [r.id for r in results if isinstance(r, Job)] == [j.id for j in jobs]
    stored = await store.get(jobs[17].id)
    assert stored.payload == {"i": 17}
    assert stored.queue == "q2"
    assert [e.kind for e in await store.events(jobs[17].id)] == ["enqueued"]
    depth = {(d.queue, d.state): d.count for d in await store.depth()}
    assert depth == {
        ("q0", JobState.QUEUED): 84,
        ("q1", JobState.QUEUED): 83,
        ("q2", JobState.QUEUED): 83,
    }


async def test_enqueue_batch_keyed_replays_conflicts_and_inserts(store: Store) -> None:
    existing = await store.enqueue(NewJob(type="t", payload={"v": 1}, idempotency_key="a"))
    await store.enqueue(NewJob(type="t", payload={"v": 1}, idempotency_key="b"))
    batch = [
        NewJob(type="t", payload={"v": 1}, idempotency_key="a"),  # replay
        NewJob(type="t", payload={"v": 9}, idempotency_key="b"),  # conflict
        NewJob(type="t", payload={"v": 1}, idempotency_key="c"),  # new
        NewJob(type="t", payload={"v": 2}),  # plain
    ]
    results = await store.enqueue_batch(batch)
    assert isinstance(results[0], Job) and results[0].id == existing.id
    assert isinstance(results[1], IdempotencyConflict)
    assert isinstance(results[2], Job) and results[2].id == batch[2].id
    assert isinstance(results[3], Job) and results[3].id == batch[3].id
    assert len((await store.list_jobs(limit=10)).jobs) == 4


async def test_enqueue_batch_reports_what_it_stored_and_notifies_each_queue(
    store: Store, db_url: str, listener: psycopg.Connection[Any]
) -> None:
    existing = await store.enqueue(NewJob(type="t", payload={"v": 1}, idempotency_key="old"))
    notified(listener)
    batch = [
        NewJob(type="t", payload={"n": 0}, queue="a"),
        NewJob(type="t", payload={"v": 1}, idempotency_key="old"),  # replay
        NewJob(type="t", payload={"v": 2}, idempotency_key="old"),  # conflict
        NewJob(type="t", payload={"n": 3}, queue="b", idempotency_key="new"),
        NewJob(type="t", payload={"n": 4}, queue="a"),
    ]
    results = await store.enqueue_batch(batch)
    assert len(results) == 5
    first, replay, conflict, keyed, last = results
    assert isinstance(first, Job) and first.id == batch[0].id
    assert replay == existing
    assert isinstance(conflict, IdempotencyConflict) and conflict.existing_id == existing.id
    assert isinstance(keyed, Job) and keyed.id == batch[3].id
    assert isinstance(last, Job) and last.id == batch[4].id
    # What the batch reports is what was stored.
    for made in (first, keyed, last):
        assert await store.get(made.id) == made
    assert count_rows(db_url) == 4
    assert sorted(notified(listener)) == ["a", "b"]
    for made in (first, keyed, last):
        assert [e.kind for e in await store.events(made.id)] == ["enqueued"]


async def test_enqueue_batch_of_nothing(store: Store) -> None:
    assert await store.enqueue_batch([]) == []


async def test_batch_with_one_bad_payload_writes_nothing(store: Store, db_url: str) -> None:
    with pytest.raises(InvalidJob, match="bad"):
        await store.enqueue_batch(
            [NewJob(type="ok"), NewJob(type="bad", payload={"x": float("nan")})]
        )
    assert count_rows(db_url) == 0


async def test_a_refused_batch_leaves_no_job_and_no_event(store: Store, db_url: str) -> None:
    # The async store has the server write the plain jobs' events while it
    # validates the batch, so a refusal must take those back too.
    good = [NewJob(type="ok") for _ in range(500)]
    with pytest.raises(InvalidJob, match="bad"):
        await store.enqueue_batch([*good, NewJob(type="bad", payload={"x": float("nan")})])
    assert count_rows(db_url) == 0
    assert count_rows(db_url, "job_events") == 0
    made = await store.enqueue_batch(good)
    assert [job.id for job in made] == [job.id for job in good]
    assert count_rows(db_url, "job_events") == 500


async def test_a_refused_batch_in_the_callers_transaction_sends_nothing(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(db_url) as producer:
        with pytest.raises(InvalidJob, match="bad"):
            await async_store.enqueue_batch(
                [NewJob(type="ok"), NewJob(type="bad", payload={"x": float("nan")})],
                conn=producer,
            )
        # Not one statement went out: the caller's transaction has not begun.
        assert producer.info.transaction_status is psycopg.pq.TransactionStatus.IDLE
        await async_store.enqueue_batch([NewJob(type="ok")], conn=producer)
        await producer.commit()
    assert count_rows(db_url) == 1
    assert count_rows(db_url, "job_events") == 1


async def test_a_batch_cancelled_while_its_events_are_written_stores_nothing(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    # Another session holds job_events, so the batch's first statement waits
    # on the server while the batch is cancelled.
    async with (
        await psycopg.AsyncConnection.connect(db_url) as holder,
        await psycopg.AsyncConnection.connect(db_url, autocommit=True) as watcher,
    ):
        await holder.execute("LOCK TABLE job_events IN EXCLUSIVE MODE")
        running_batch = asyncio.create_task(  # noqa: RUF006 (kept: cancelled and awaited below)
            async_store.enqueue_batch([NewJob(type="t") for _ in range(300)])
        )

        async def waiting_on_the_lock() -> bool:
            row = await (
                await watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event_type = 'Lock' AND query LIKE '%job_events%'"
                )
            ).fetchone()
            return row is not None and row[0] == 1

        await eventually(waiting_on_the_lock)
        running_batch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running_batch
        await holder.rollback()
    assert count_rows(db_url) == 0
    assert count_rows(db_url, "job_events") == 0
    made = await async_store.enqueue_batch([NewJob(type="t") for _ in range(3)])
    assert count_rows(db_url) == count_rows(db_url, "job_events") == len(made) == 3


async def test_a_batch_across_copy_chunks_and_slices_stores_each_job_and_one_event(
    store: Store, db_url: str
) -> None:
    jobs = [NewJob(type="bulk", payload={"i": i}) for i in range(COPY_CHUNK + COPY_SLICE + 1)]
    jobs.insert(3, NewJob(type="keyed", idempotency_key="k"))
    results = await store.enqueue_batch(jobs)
    assert [r.id for r in results if isinstance(r, Job)] == [job.id for job in jobs]
    assert count_rows(db_url) == count_rows(db_url, "job_events") == len(jobs)
    for index in (0, 3, COPY_SLICE, COPY_SLICE + 1, COPY_CHUNK, len(jobs) - 1):
        made = results[index]
        assert isinstance(made, Job) and await store.get(made.id) == made
        assert [e.kind for e in await store.events(made.id)] == ["enqueued"]


async def test_enqueue_batch_of_100000_jobs(store: Store) -> None:
    jobs = [NewJob(type="bulk", payload={"i": i}) for i in range(100_000)]
    results = await store.enqueue_batch(jobs)
    assert len(results) == 100_000
    (depth,) = await store.depth()
    assert depth.count == 100_000


# -- enqueue_many: jobs alike but for the payload -----------------------------------------


async def test_enqueue_many_inserts_one_job_per_payload_in_order(store: Store) -> None:
    # More than one COPY chunk (5,000), so the chunking is covered too.
    payloads = [{"i": i} for i in range(12_345)]
    backoff = Backoff(kind=BackoffKind.LINEAR, base=timedelta(seconds=3))
    ids = await store.enqueue_many(
        "bulk", payloads, queue="imports", priority=7, max_attempts=4, backoff=backoff
    )
    assert len(ids) == len(set(ids)) == 12_345
    assert ids == sorted(ids), "ids are time-ordered, in payload order"
    for index in (0, 4_999, 5_000, 12_344):
        job = await store.get(ids[index])
        assert job.payload == {"i": index}
        assert (job.type, job.queue, job.priority, job.max_attempts) == ("bulk", "imports", 7, 4)
        assert job.backoff == backoff
        assert job.state is JobState.QUEUED and job.idempotency_key is None
        assert job.run_at == job.created_at
        assert [e.kind for e in await store.events(job.id)] == ["enqueued"]
    (depth,) = await store.depth()
    assert (depth.queue, depth.state, depth.count) == ("imports", JobState.QUEUED, 12_345)
    claimed = await store.claim(["imports"], "w1", 3, LEASE)
    assert [j.id for j in claimed] == ids[:3]


async def test_enqueue_many_takes_payloads_of_every_json_kind(store: Store) -> None:
    payloads: list[Any] = [None, 0, -1.5, "é ✓", True, [], {}, {"a": [1, {"b": None}]}]
    ids = await store.enqueue_many("t", payloads)
    assert [(await store.get(i)).payload for i in ids] == payloads


async def test_enqueue_many_delays_every_job_alike(store: Store) -> None:
    before = await store.now()
    ids = await store.enqueue_many("t", [1, 2], delay=timedelta(hours=1))
    for job_id in ids:
        job = await store.get(job_id)
        assert job.run_at - job.created_at == timedelta(hours=1)
        assert job.run_at >= before + timedelta(hours=1)
    at = before + timedelta(days=2)
    (later,) = await store.enqueue_many("t", [3], run_at=at)
    assert (await store.get(later)).run_at == at
    assert await store.claim(["default"], "w1", 10, LEASE) == []


async def test_enqueue_many_notifies_its_queue_once(
    store: Store, listener: psycopg.Connection[Any]
) -> None:
    await store.enqueue_many("t", range(10), queue="bulk")
    assert notified(listener) == ["bulk"]


async def test_enqueue_many_of_nothing_writes_nothing_but_still_checks(
    store: Store, db_url: str, listener: psycopg.Connection[Any]
) -> None:
    assert await store.enqueue_many("t", []) == []
    assert count_rows(db_url) == 0
    assert notified(listener) == []
    with pytest.raises(InvalidJob, match="type"):
        await store.enqueue_many("", [])


@pytest.mark.parametrize(
    ("payloads", "fields", "error"),
    [
        ([1, 2, float("nan")], {}, "payload 2 of job type 't' is not valid JSON"),
        ([1, {"k": object()}], {}, r"payload 1 of job type 't' is not a JSON value: \['k'\]"),
        ([1, {3: "int key"}], {}, r"payload 1 .*\[3\] \(a key\)"),
        (["ok", "\ud800"], {}, "payload 1 of job type 't' is refused: .*surrogate"),
        (["ok", {"s": "nul\x00"}], {}, "payload 1 of job type 't' is refused"),
        (["x" * 10, "x" * 2_000], {}, "payload 1 of job type 't' is 2002 bytes, over"),
        ({"a": 1}, {}, "not a dict"),
        ("abc", {}, "not a str"),
        ([1], {"priority": MAX_PRIORITY + 1}, "priority"),
        ([1], {"max_attempts": 0}, "max_attempts"),
        ([1], {"queue": "q\x00"}, "queue"),
        (
            [1],
            {"delay": timedelta(hours=1), "run_at": datetime(2030, 1, 1, tzinfo=UTC)},
            "not both",
        ),
        ([1], {"run_at": datetime(2030, 1, 1)}, "timezone-aware"),
        ([1], {"delay": timedelta(days=3_000_000)}, "delay"),
    ],
)
async def test_enqueue_many_refuses_bad_input_and_writes_nothing(
    stores: Stores, db_url: str, payloads: Any, fields: dict[str, Any], error: str
) -> None:
    store = await stores.make(max_payload_bytes=1_000)
    with pytest.raises(InvalidJob, match=error):
        await store.enqueue_many("t", payloads, **fields)
    assert count_rows(db_url) == 0


async def test_enqueue_many_checks_payloads_against_the_types_model(
    stores: Stores, db_url: str
) -> None:
    class Order(BaseModel):
        order_id: int = Field(ge=1)

    store = await stores.make(payload_models={"ship": Order})
    with pytest.raises(InvalidJob, match="payload 1 of job type 'ship' does not match Order"):
        await store.enqueue_many("ship", [{"order_id": 1}, {"order_id": 0}])
    assert count_rows(db_url) == 0
    ids = await store.enqueue_many("ship", [{"order_id": "7"}])
    # Stored as the model dumps it, as enqueue does.
    assert (await store.get(ids[0])).payload == {"order_id": 7}


async def test_enqueue_many_in_the_callers_transaction_commits_or_rolls_back_with_it(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(db_url) as producer:
        ids = await async_store.enqueue_many("t", [1, 2], conn=producer)
        await producer.rollback()
        kept = await async_store.enqueue_many("t", [3], conn=producer)
        await producer.commit()
    for gone in ids:
        with pytest.raises(JobNotFound):
            await async_store.get(gone)
    assert (await async_store.get(kept[0])).payload == 3
    assert count_rows(db_url) == 1


# -- claim -----------------------------------------------------------------------------


async def test_claim_orders_by_priority_then_run_at_then_id(store: Store) -> None:
    now = await store.now()
    late = await store.enqueue(NewJob(type="t", priority=1, run_at=now - timedelta(seconds=1)))
    early = await store.enqueue(NewJob(type="t", priority=1, run_at=now - timedelta(seconds=9)))
    urgent = await store.enqueue(NewJob(type="t", priority=0))
    claimed = await store.claim(["default"], "w1", 3, LEASE)
    assert [j.id for j in claimed] == [urgent.id, early.id, late.id]
    for job in claimed:
        assert job.state is JobState.LEASED
        assert job.attempts == 1
        assert job.lease_owner == "w1"
        assert job.lease_expires_at is not None


async def test_claim_takes_only_due_jobs_of_the_given_queues(store: Store) -> None:
    await store.enqueue(NewJob(type="t", queue="a"))
    await store.enqueue(NewJob(type="t", queue="b"))
    await store.enqueue(NewJob(type="t", queue="a", delay=timedelta(minutes=5)))
    claimed = await store.claim(["a"], "w1", 10, LEASE)
    assert [j.queue for j in claimed] == ["a"]


async def test_claim_over_delayed_jobs_of_several_priorities_takes_due_jobs_in_order(
    store: Store,
) -> None:
    # The claim walks the queue one priority level at a time (a loose index
    # scan) and carries what it still wants to the next level: claims of 3
    # must still take the due jobs exactly in priority, run_at, id order,
    # across levels, and never a delayed one, even a more urgent one.
    now = await store.now()
    due: list[Job] = []
    delayed: set[UUID] = set()
    for priority in (3, 0, 2, 1, 5, MIN_PRIORITY, MAX_PRIORITY):
        for seconds in (7, 1, 4):
            run_at = now - timedelta(seconds=seconds)
            due.append(await store.enqueue(NewJob(type="t", priority=priority, run_at=run_at)))
        # Two due jobs with one run_at: id decides.
        tie = now - timedelta(seconds=2)
        for pair in await store.enqueue_batch(
            [NewJob(type="t", priority=priority, run_at=tie) for _ in range(2)]
        ):
            assert isinstance(pair, Job)
            due.append(pair)
        for minutes in (1, 60):
            late = NewJob(type="t", priority=priority, delay=timedelta(minutes=minutes))
            delayed.add((await store.enqueue(late)).id)
    # A level of delayed jobs only, before and between the due ones.
    for priority in (-1, 4):
        late = NewJob(type="t", priority=priority, delay=timedelta(minutes=5))
        delayed.add((await store.enqueue(late)).id)
    expected = [j.id for j in sorted(due, key=lambda j: (j.priority, j.run_at, j.id))]

    taken: list[UUID] = []
    while batch := await store.claim(["default"], "w1", 3, LEASE):
        assert len(batch) <= 3
        taken.extend(j.id for j in batch)
    assert taken == expected
    assert not delayed & set(taken)


async def test_claim_skips_a_locked_due_job_and_takes_the_next_ones(
    store: Store, db_url: str
) -> None:
    now = await store.now()
    first = await store.enqueue(NewJob(type="t", priority=0, run_at=now - timedelta(seconds=3)))
    second = await store.enqueue(NewJob(type="t", priority=0, run_at=now - timedelta(seconds=2)))
    third = await store.enqueue(NewJob(type="t", priority=1, run_at=now - timedelta(seconds=9)))
    await store.enqueue(NewJob(type="t", priority=0, delay=timedelta(minutes=5)))
    # Another claimer holds the best job: SKIP LOCKED passes it without
    # waiting and the claim fills up from the same level, then the next.
    with psycopg.connect(db_url) as holder:
        holder.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE", (first.id,))
        claimed = await store.claim(["default"], "w1", 2, LEASE)
        assert [j.id for j in claimed] == [second.id, third.id]
        holder.rollback()
    assert [j.id for j in await store.claim(["default"], "w1", 5, LEASE)] == [first.id]


async def test_eight_concurrent_claimers_claim_each_job_exactly_once(
    store: Store, stores: Stores
) -> None:
    await store.enqueue_batch([NewJob(type="t", payload={"i": i}) for i in range(5000)])
    claimers = [await stores.make(own_pool=True) for _ in range(8)]

    async def drain(n: int) -> list[UUID]:
        got: list[UUID] = []
        while batch := await claimers[n].claim(["default"], f"w{n}", 37, LEASE):
            got.extend(j.id for j in batch)
        return got

    claimed = await concurrently(*(partial(drain, n) for n in range(8)))
    every = [i for ids in claimed for i in ids]
    assert len(every) == 5000
    assert len(set(every)) == 5000
    assert sum(1 for ids in claimed if ids) > 1


async def test_terminal_event_mode_writes_no_claim_events(stores: Stores) -> None:
    store = await stores.make(event_mode=EventMode.TERMINAL)
    job = await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store)
    await store.complete(claimed, "w1")
    assert [e.kind for e in await store.events(job.id)] == ["enqueued", "succeeded"]


async def test_all_event_mode_records_the_whole_path(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    await store.complete(await claim_one(store), "w1")
    events = await store.events(job.id)
    assert [(e.kind, e.from_state, e.to_state) for e in events] == [
        ("enqueued", None, JobState.QUEUED),
        ("claimed", JobState.QUEUED, JobState.LEASED),
        ("succeeded", JobState.LEASED, JobState.SUCCEEDED),
    ]
    assert events[1].owner == "w1"


# -- heartbeat -------------------------------------------------------------------------


async def test_heartbeat_extends_owned_leases_only(store: Store) -> None:
    for _ in range(3):
        await store.enqueue(NewJob(type="t"))
    a, b = await store.claim(["default"], "w1", 2, LEASE)
    c = await claim_one(store, "w2")
    before = await store.now()
    kept = await store.heartbeat("w1", [a, b, c], timedelta(minutes=10))
    after = await store.now()
    assert kept == {a.id, b.id}
    until = (await store.get(a.id)).lease_expires_at
    assert until is not None
    assert before + timedelta(minutes=10) <= until <= after + timedelta(minutes=10)
    assert (await store.get(c.id)).lease_expires_at != until


async def test_heartbeat_leaves_out_cancel_requested_and_expired_ids(store: Store) -> None:
    for _ in range(3):
        await store.enqueue(NewJob(type="t"))
    live = await claim_one(store)
    cancelled = await claim_one(store)
    expired = (await store.claim(["default"], "w1", 1, timedelta(milliseconds=1)))[0]
    await leases_ended(store, expired)
    await store.cancel(cancelled.id)
    kept = await store.heartbeat("w1", [live, cancelled, expired], LEASE)
    assert kept == {live.id}


# -- complete --------------------------------------------------------------------------


async def test_complete_runs_the_callback_once_with_the_completion(
    store: Store, effects_table: str
) -> None:
    job = await store.enqueue(NewJob(type="t"))
    done = await store.complete(await claim_one(store), "w1", write_effect(job))
    assert done.state is JobState.SUCCEEDED
    assert done.finished_at is not None
    assert effect_rows(effects_table) == [job.id]
    assert await store.effect_done(done)


async def test_complete_after_reap_raises_lease_lost_and_callback_writes_are_gone(
    store: Store, effects_table: str
) -> None:
    await store.enqueue(NewJob(type="t"))
    claimed = (await store.claim(["default"], "w1", 1, timedelta(milliseconds=1)))[0]
    await leases_ended(store, claimed)
    (reaped,) = await store.reap_expired()
    assert reaped.state is JobState.QUEUED
    with pytest.raises(LeaseLost):
        await store.complete(claimed, "w1", write_effect(claimed))
    assert effect_rows(effects_table) == []
    assert not await store.effect_done(claimed)
    assert (await store.get(claimed.id)).state is JobState.QUEUED


async def test_complete_by_another_owner_raises_lease_lost(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store, "w1")
    with pytest.raises(LeaseLost):
        await store.complete(claimed, "w2")
    assert (await store.get(claimed.id)).state is JobState.LEASED


async def test_an_expired_lease_is_lost_before_the_reaper_sees_it(
    store: Store, effects_table: str
) -> None:
    # One rule for every owner-guarded transition: once the lease has expired,
    # complete, fail, release and heartbeat all refuse, reaped or not.
    for _ in range(4):
        await store.enqueue(NewJob(type="t"))
    a, b, c, d = await store.claim(["default"], "w1", 4, timedelta(milliseconds=1))
    await leases_ended(store, a, b, c, d)
    with pytest.raises(LeaseLost):
        await store.complete(a, "w1", write_effect(a))
    with pytest.raises(LeaseLost):
        await store.complete(b, "w1")
    with pytest.raises(LeaseLost):
        await store.fail(c, "w1", "boom")
    with pytest.raises(LeaseLost):
        await store.release(d, "w1", "bye")
    assert await store.heartbeat("w1", [a, b, c, d], LEASE) == set()
    assert effect_rows(effects_table) == []
    for job in (a, b, c, d):
        stored = await store.get(job.id)
        assert stored.state is JobState.LEASED and stored.attempts == 1
    assert {j.id for j in await store.reap_expired()} == {
        a.id,
        b.id,
        c.id,
        d.id,
    }


async def test_a_stale_attempt_of_the_same_owner_is_fenced_out(
    store: Store, effects_table: str
) -> None:
    await store.enqueue(NewJob(type="t"))
    stale = (await store.claim(["default"], "w1", 1, timedelta(milliseconds=1)))[0]
    await leases_ended(store, stale)
    reaped = await store.reap_expired(limit=10)
    # The reaper's backoff puts the retry a second later: claim at that time.
    fresh = await claim_one(store, "w1", now=reaped[0].run_at)
    assert fresh.id == stale.id and fresh.attempts == stale.attempts + 1
    with pytest.raises(LeaseLost):
        await store.complete(stale, "w1", write_effect(stale))
    with pytest.raises(LeaseLost):
        await store.fail(stale, "w1", "stale")
    with pytest.raises(LeaseLost):
        await store.release(stale, "w1", "stale")
    assert await store.heartbeat("w1", [stale], LEASE) == set()
    results = await store.record_outcomes("w1", [Outcome(job=stale, commit=write_effect(stale))])
    assert isinstance(results[0], LeaseLost)
    assert effect_rows(effects_table) == []
    assert await store.heartbeat("w1", [fresh], LEASE) == {fresh.id}
    done = await store.complete(fresh, "w1", write_effect(fresh))
    assert done.state is JobState.SUCCEEDED and done.attempts == 2
    assert effect_rows(effects_table) == [fresh.id]


async def test_callback_that_raises_rolls_back_everything_and_leaves_job_leased(
    store: Store, effects_table: str
) -> None:
    job = await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store)

    broken = Effect(effect_insert(job), raises=RuntimeError("effect failed"))
    with pytest.raises(RuntimeError, match="effect failed"):
        await store.complete(claimed, "w1", broken)
    assert effect_rows(effects_table) == []
    assert not await store.effect_done(claimed)
    assert (await store.get(job.id)).state is JobState.LEASED


async def test_same_key_in_two_queues_runs_both_effects(store: Store, effects_table: str) -> None:
    # Idempotency keys are per queue: these are two jobs, and each effect must
    # commit. (The first version keyed the ledger by type and key only and
    # skipped the second callback while reporting the job succeeded.)
    first = await store.enqueue(NewJob(type="t", idempotency_key="pay-1", queue="q1"))
    second = await store.enqueue(NewJob(type="t", idempotency_key="pay-1", queue="q2"))
    assert first.id != second.id
    done = await store.complete(await claim_one(store, queue="q1"), "w1", write_effect(first))
    assert done.state is JobState.SUCCEEDED
    claimed = await claim_one(store, queue="q2")
    done = await store.complete(claimed, "w1", write_effect(second, "second"))
    assert done.state is JobState.SUCCEEDED
    assert sorted(effect_rows(effects_table)) == sorted([first.id, second.id])
    assert await store.effect_done(first) and await store.effect_done(second)


async def test_same_key_in_two_queues_in_one_group_runs_both_effects(
    store: Store, effects_table: str
) -> None:
    jobs = [
        await store.enqueue(NewJob(type="t", idempotency_key="k", queue=q))
        for q in ("q1", "q2", "q3")
    ]
    claimed = await store.claim(["q1", "q2", "q3"], "w1", 3, LEASE)
    results = await store.record_outcomes(
        "w1", [Outcome(job=j, commit=write_effect(j)) for j in claimed]
    )
    assert all(isinstance(r, Job) and r.state is JobState.SUCCEEDED for r in results)
    assert sorted(effect_rows(effects_table)) == sorted(j.id for j in jobs)


async def test_effect_keys_of_distinct_queue_and_key_pairs_never_collide(store: Store) -> None:
    pairs = [("a:b", "c"), ("a", "b:c"), ("a'", "b"), ("a", "'b"), ("a''", "b"), ("a\\", "b")]
    keys = set()
    for queue, key in pairs:
        job = await store.enqueue(NewJob(type="t", queue=queue, idempotency_key=key))
        keys.add(await store.effect_key(job))
    assert len(keys) == len(pairs)
    unkeyed = await store.enqueue(NewJob(type="t"))
    assert await store.effect_key(unkeyed) == ("job:t", str(unkeyed.id))


async def test_keyed_job_whose_effect_committed_does_not_rerun_the_callback(
    store: Store, effects_table: str
) -> None:
    job = await store.enqueue(NewJob(type="t", idempotency_key="pay-1", queue="q1"))
    claimed = await claim_one(store, queue="q1")
    scope, key = await store.effect_key(job)
    # The effect committed on an earlier attempt (ledger row present) ...
    with psycopg.connect(effects_table, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO processed_effects (scope, key, job_id) VALUES (%s, %s, %s)",
            (scope, key, job.id),
        )
    done = await store.complete(claimed, "w1", write_effect(job))
    assert done.state is JobState.SUCCEEDED
    assert effect_rows(effects_table) == []


async def test_reaped_job_whose_effect_committed_does_not_rerun_the_callback(
    store: Store, effects_table: str
) -> None:
    job = await store.enqueue(NewJob(type="t"))
    await claim_one(store)
    # The effect committed on an earlier attempt (ledger row present) ...
    with psycopg.connect(effects_table, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO processed_effects (scope, key, job_id) VALUES (%s, %s, %s)",
            ("job:t", str(job.id), job.id),
        )
    claimed = await store.get(job.id)
    done = await store.complete(claimed, "w1", write_effect(job))
    assert done.state is JobState.SUCCEEDED
    assert effect_rows(effects_table) == []


async def test_complete_or_fail_of_cancel_requested_job_ends_cancelled(store: Store) -> None:
    a = await store.enqueue(NewJob(type="t"))
    b = await store.enqueue(NewJob(type="t"))
    ca, cb = await store.claim(["default"], "w1", 2, LEASE)
    await store.cancel(a.id)
    await store.cancel(b.id)
    done = await store.complete(ca, "w1")
    failed = await store.fail(cb, "w1", "boom")
    assert done.state is JobState.CANCELLED
    assert failed.state is JobState.CANCELLED
    for job_id in (a.id, b.id):
        kinds = [e.kind for e in await store.events(job_id)]
        assert kinds[-2:] == ["cancel_requested", "cancelled"]


async def test_group_commit_completes_each_and_isolates_lost_leases(
    store: Store, effects_table: str
) -> None:
    jobs = [await store.enqueue(NewJob(type="t", payload={"i": i})) for i in range(6)]
    claimed = await store.claim(["default"], "w1", 6, LEASE)
    stolen = claimed[2]
    with psycopg.connect(effects_table, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET lease_owner = 'thief' WHERE id = %s", (stolen.id,))
    completions = [Outcome(job=j, commit=write_effect(j)) for j in claimed[:4]]
    completions += [Outcome(job=j) for j in claimed[4:]]
    results = await store.record_outcomes("w1", completions)
    assert isinstance(results[2], LeaseLost)
    assert [isinstance(r, Job) and r.state is JobState.SUCCEEDED for r in results] == [
        True,
        True,
        False,
        True,
        True,
        True,
    ]
    assert sorted(effect_rows(effects_table)) == sorted(j.id for j in claimed[:4] if j != stolen)
    assert len(jobs) == 6


async def test_group_commit_falls_back_when_one_callback_fails(
    store: Store, effects_table: str
) -> None:
    for i in range(4):
        await store.enqueue(NewJob(type="t", payload={"i": i}))
    claimed = await store.claim(["default"], "w1", 4, LEASE)

    broken = Effect(raises=ValueError("bad effect"))
    completions = [Outcome(job=j, commit=write_effect(j)) for j in claimed]
    completions[1] = Outcome(job=claimed[1], commit=broken)
    results = await store.record_outcomes("w1", completions)
    assert isinstance(results[1], ValueError)
    assert all(isinstance(r, Job) for i, r in enumerate(results) if i != 1)
    assert sorted(effect_rows(effects_table)) == sorted(
        j.id for i, j in enumerate(claimed) if i != 1
    )
    assert (await store.get(claimed[1].id)).state is JobState.LEASED
    # The callback before the failing one ran in the rolled-back group and
    # again; the failing one is not run again; those after it ran once.
    assert [c.invocations for c in completions] == [2, 1, 1, 1]


async def test_group_fallback_after_a_failing_statement_is_quiet_and_counted(
    store: Store, effects_table: str, caplog: pytest.LogCaptureFixture
) -> None:
    for i in range(4):
        await store.enqueue(NewJob(type="t", payload={"i": i}))
    claimed = await store.claim(["default"], "w1", 4, LEASE)

    bad_sql = Effect(("INSERT INTO effect_rows (job_id) VALUES (NULL)", None))  # NOT NULL
    completions = [Outcome(job=j, commit=write_effect(j)) for j in claimed]
    completions[2] = Outcome(job=claimed[2], commit=bad_sql)
    with caplog.at_level(logging.WARNING):
        results = await store.record_outcomes("w1", completions)
    assert isinstance(results[2], Exception) and not isinstance(results[2], Job)
    assert all(isinstance(r, Job) for i, r in enumerate(results) if i != 2)
    assert sorted(effect_rows(effects_table)) == sorted(
        j.id for i, j in enumerate(claimed) if i != 2
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert sum(c.invocations - 1 for c in completions) >= 1


async def test_commit_timeout_rolls_back_the_completion(stores: Stores, effects_table: str) -> None:
    store = await stores.make(commit_timeout=timedelta(milliseconds=50))
    job = await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store)
    slow = Effect(effect_insert(job), ("SELECT pg_sleep(1)", None))
    with pytest.raises(CommitTimeout):
        await store.complete(claimed, "w1", slow)
    assert effect_rows(effects_table) == []
    assert (await store.get(job.id)).state is JobState.LEASED


class SleepingEffect:
    """A commit callback that writes its effect, then waits outside the database.

    For the async store it awaits ``asyncio.sleep`` (an HTTP call, a signer)
    and can be cancelled; in the sync twin it blocks in ``time.sleep``, which
    nothing can interrupt.
    """

    def __init__(self, job: Job, seconds: float) -> None:
        self.job = job
        self.seconds = seconds
        self.cancelled = False

    async def __call__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute(*effect_insert(self.job))
        if True:  # sync: else
            try:
                await asyncio.sleep(self.seconds)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        else:
            time.sleep(self.seconds)  # noqa: ASYNC251 (the sync twin's callback)


def row_lock_is_free(db_url: str, job_id: UUID) -> bool:
    with psycopg.connect(db_url) as conn:
        try:
            conn.execute("SELECT id FROM jobs WHERE id = %s FOR UPDATE NOWAIT", (job_id,))
        except psycopg.errors.LockNotAvailable:
            return False
        return True


async def test_a_callback_waiting_past_the_commit_timeout_is_bounded_in_wall_time(
    stores: Stores, effects_table: str
) -> None:
    limit = timedelta(milliseconds=200)
    store = await stores.make(commit_timeout=limit)
    job = await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store)
    # The async callback would wait far past the limit and is cancelled; the
    # sync one cannot be interrupted, so it waits a little past it and the
    # transaction is rolled back when it returns.
    if True:  # sync: else  # noqa: SIM108
        seconds = 30.0
    else:
        seconds = 0.5
    slow = SleepingEffect(claimed, seconds)
    started = time.monotonic()  # sync: skip
    with pytest.raises(CommitTimeout, match=r"0\.2s") as info:
        await store.complete(claimed, "w1", slow)
    elapsed = time.monotonic() - started  # sync: skip
    assert "commit timeout" in str(info.value)
    assert slow.cancelled  # sync: skip
    assert elapsed < 5, elapsed  # sync: skip
    assert row_lock_is_free(effects_table, job.id)
    assert effect_rows(effects_table) == []
    got = await store.get(job.id)
    assert got.state is JobState.LEASED
    # Still this owner's: the worker fails the attempt as for any completion error.
    failed = await store.fail(claimed, "w1", str(info.value))
    assert failed.state is JobState.QUEUED
    assert "commit timeout" in (failed.last_error or "")


async def test_group_commit_times_out_only_the_callback_that_ran_out_of_time(
    stores: Stores, effects_table: str
) -> None:
    store = await stores.make(commit_timeout=timedelta(milliseconds=300))
    for i in range(3):
        await store.enqueue(NewJob(type="t", payload={"i": i}))
    claimed = await store.claim(["default"], "w1", 3, LEASE)
    if True:  # sync: else  # noqa: SIM108
        seconds = 30.0
    else:
        seconds = 0.6
    completions = [Outcome(job=j, commit=write_effect(j)) for j in claimed]
    completions[1] = Outcome(job=claimed[1], commit=SleepingEffect(claimed[1], seconds))
    results = await store.record_outcomes("w1", completions)
    assert isinstance(results[1], CommitTimeout), results[1]
    assert isinstance(results[0], Job) and isinstance(results[2], Job), results
    assert sorted(effect_rows(effects_table)) == sorted([claimed[0].id, claimed[2].id])
    assert (await store.get(claimed[1].id)).state is JobState.LEASED
    assert row_lock_is_free(effects_table, claimed[1].id)


# -- fail, reap ------------------------------------------------------------------------


async def test_fail_requeues_after_backoff_then_dead_at_max_attempts(stores: Stores) -> None:
    store = await stores.make(retry_jitter=0)
    backoff = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=50))
    job = await store.enqueue(NewJob(type="t", max_attempts=2, backoff=backoff))
    claimed = await claim_one(store)
    before = await store.now()
    failed = await store.fail(claimed, "w1", "first error")
    after = await store.now()
    assert failed.state is JobState.QUEUED
    assert before + backoff.base <= failed.run_at <= after + backoff.base
    assert failed.last_error == "first error"
    # Claim when the backoff has run out rather than sleep until then.
    dead = await store.fail(await claim_one(store, now=failed.run_at), "w1", "second error")
    assert dead.state is JobState.DEAD
    assert dead.attempts == 2
    assert dead.finished_at is not None
    kinds = [e.kind for e in await store.events(job.id)]
    assert kinds == ["enqueued", "claimed", "failed", "claimed", "dead"]
    assert (await store.events(job.id))[-1].detail == "second error"


async def test_outcomes_of_every_kind_are_recorded_in_one_batch(stores: Stores) -> None:
    store = await stores.make(retry_jitter=0)
    backoff = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(seconds=30))
    jobs = [
        await store.enqueue(NewJob(type="t", backoff=backoff, payload={"i": i})) for i in range(5)
    ]
    claimed = {j.id: j for j in await store.claim(["default"], "w1", 5, LEASE)}
    a, b, c, d, e = (claimed[j.id] for j in jobs)
    before = await store.now()
    results = await store.record_outcomes(
        "w1",
        [
            Outcome(job=a),
            Outcome(job=b, kind=OutcomeKind.FAIL, detail="boom"),
            Outcome(job=c, kind=OutcomeKind.RELEASE, detail="shutting down"),
            Outcome(job=d, kind=OutcomeKind.SNOOZE, delay=timedelta(minutes=10)),
            Outcome(job=e, kind=OutcomeKind.CANCEL, detail="not needed any more"),
        ],
    )
    after = await store.now()
    done, failed, released, snoozed, cancelled = results
    assert isinstance(done, Job) and done.state is JobState.SUCCEEDED and done.attempts == 1
    assert isinstance(failed, Job) and failed.state is JobState.QUEUED and failed.attempts == 1
    assert before + timedelta(seconds=30) <= failed.run_at <= after + timedelta(seconds=30)
    assert failed.last_error == "boom"
    assert isinstance(released, Job) and released.state is JobState.QUEUED
    assert released.attempts == 0 and before <= released.run_at <= after
    assert isinstance(snoozed, Job) and snoozed.state is JobState.QUEUED
    assert snoozed.attempts == 0  # a snooze does not spend an attempt
    assert before + timedelta(minutes=10) <= snoozed.run_at <= after + timedelta(minutes=10)
    assert isinstance(cancelled, Job) and cancelled.state is JobState.CANCELLED
    assert cancelled.finished_at is not None and cancelled.last_error == "not needed any more"
    for job, stored in zip(jobs, results, strict=True):
        assert isinstance(stored, Job)
        fetched = await store.get(job.id)
        assert (fetched.state, fetched.attempts, fetched.run_at) == (
            stored.state,
            stored.attempts,
            stored.run_at,
        )
        assert fetched.lease_owner is None and fetched.lease_expires_at is None
    kinds = [(await store.events(j.id))[-1].kind for j in jobs]
    assert kinds == ["succeeded", "failed", "released", "snoozed", "cancelled"]


async def test_a_requested_cancel_wins_over_every_outcome(store: Store) -> None:
    jobs = [await store.enqueue(NewJob(type="t", payload={"i": i})) for i in range(4)]
    claimed = {j.id: j for j in await store.claim(["default"], "w1", 4, LEASE)}
    for job in jobs:
        await store.cancel(job.id)
    kinds = [OutcomeKind.COMPLETE, OutcomeKind.FAIL, OutcomeKind.RELEASE, OutcomeKind.SNOOZE]
    results = await store.record_outcomes(
        "w1", [Outcome(job=claimed[j.id], kind=k) for j, k in zip(jobs, kinds, strict=True)]
    )
    assert [r.state for r in results if isinstance(r, Job)] == [JobState.CANCELLED] * 4


async def test_failure_backoff_is_jittered_within_its_bounds(stores: Stores) -> None:
    store = await stores.make(retry_jitter=0.1)
    backoff = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(seconds=100))
    await store.enqueue_batch([NewJob(type="t", backoff=backoff) for _ in range(40)])
    claimed = await store.claim(["default"], "w1", 40, LEASE)
    before = await store.now()
    results = await store.record_outcomes(
        "w1", [Outcome(job=j, kind=OutcomeKind.FAIL, detail="x") for j in claimed]
    )
    after = await store.now()
    waits = [r.run_at for r in results if isinstance(r, Job)]
    assert len(waits) == 40
    assert all(before + timedelta(seconds=90) <= w <= after + timedelta(seconds=110) for w in waits)
    assert len(set(waits)) > 1  # spread, not one instant


async def test_backoff_of_a_late_attempt_is_capped_not_overflowed(
    stores: Stores, db_url: str
) -> None:
    store = await stores.make(retry_jitter=0)
    backoff = Backoff(base=timedelta(hours=1), max=timedelta(days=30))
    job = await store.enqueue(NewJob(type="t", backoff=backoff, max_attempts=1000))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET attempts = 499 WHERE id = %s", (job.id,))
    claimed = await claim_one(store)
    assert claimed.attempts == 500
    before = await store.now()
    failed = await store.fail(claimed, "w1", "again")
    after = await store.now()
    assert before + timedelta(days=30) <= failed.run_at <= after + timedelta(days=30)


@pytest.mark.parametrize(
    ("kind", "base", "attempt"),
    [
        (BackoffKind.EXPONENTIAL, timedelta(hours=1), 35),
        (BackoffKind.EXPONENTIAL, timedelta(hours=1), 41),
        (BackoffKind.EXPONENTIAL, timedelta(hours=1), MAX_ATTEMPTS_LIMIT - 1),
        (BackoffKind.LINEAR, MAX_DELAY, MAX_ATTEMPTS_LIMIT - 1),
    ],
)
async def test_backoff_at_the_largest_bounds_stays_within_its_max(
    stores: Stores, db_url: str, kind: BackoffKind, base: timedelta, attempt: int
) -> None:
    store = await stores.make(retry_jitter=0)
    backoff = Backoff(kind=kind, base=base, max=MAX_DELAY)
    job = await store.enqueue(NewJob(type="t", backoff=backoff, max_attempts=MAX_ATTEMPTS_LIMIT))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET attempts = %s WHERE id = %s", (attempt - 1, job.id))
    claimed = await claim_one(store)
    before = await store.now()
    failed = await store.fail(claimed, "w1", "again")
    assert failed.state is JobState.QUEUED
    assert before + base <= failed.run_at <= before + MAX_DELAY + timedelta(minutes=1)


async def test_fail_bounds_the_error_text(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    failed = await store.fail(await claim_one(store), "w1", "x" * 100_000)
    assert failed.last_error is not None and len(failed.last_error) == 8192


async def test_fail_after_lease_lost_changes_nothing(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store, "w1")
    with pytest.raises(LeaseLost):
        await store.fail(claimed, "w2", "nope")
    assert (await store.get(claimed.id)).state is JobState.LEASED


async def test_reap_requeues_with_backoff_and_crash_costs_one_attempt(stores: Stores) -> None:
    store = await stores.make(retry_jitter=0)
    backoff = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(seconds=7))
    job = await store.enqueue(NewJob(type="t", backoff=backoff, max_attempts=2))
    await leases_ended(store, *await store.claim(["default"], "w1", 1, timedelta(milliseconds=1)))
    now = await store.now()
    (reaped,) = await store.reap_expired(now=now)
    assert reaped.state is JobState.QUEUED
    assert reaped.attempts == 1
    assert reaped.run_at == now + timedelta(seconds=7)
    assert reaped.lease_owner is None
    assert [e.kind for e in await store.events(job.id)][-1] == "reaped"
    # Second crash spends the last attempt: dead.
    with psycopg.connect(str(store.pool.conninfo), autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs SET run_at = now() - interval '1 second' WHERE id = %s", (job.id,)
        )
    await leases_ended(store, *await store.claim(["default"], "w1", 1, timedelta(milliseconds=1)))
    (dead,) = await store.reap_expired()
    assert dead.state is JobState.DEAD
    assert dead.attempts == 2


async def test_reap_leaves_live_leases_alone(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    await claim_one(store)
    assert await store.reap_expired() == []


async def test_concurrent_reapers_reap_each_job_once(store: Store, stores: Stores) -> None:
    await store.enqueue_batch([NewJob(type="t") for _ in range(200)])
    await leases_ended(store, *await store.claim(["default"], "w1", 200, timedelta(milliseconds=1)))
    reapers = [await stores.make(own_pool=True) for _ in range(3)]
    results = await concurrently(*(partial(r.reap_expired, limit=50) for r in reapers))
    results += [await store.reap_expired()]
    ids = [j.id for batch in results for j in batch]
    assert len(ids) == len(set(ids)) == 200


# -- operators -------------------------------------------------------------------------


async def test_get_unknown_job_raises_job_not_found(store: Store) -> None:
    from jobrun.domain import new_job_id

    with pytest.raises(JobNotFound):
        await store.get(new_job_id())


async def test_list_filters_and_paginates_newest_first(store: Store) -> None:
    ids = [(await store.enqueue(NewJob(type="a" if i % 2 else "b"))).id for i in range(7)]
    page = await store.list_jobs(JobFilter(type="a"), limit=2)
    assert [j.id for j in page.jobs] == [ids[5], ids[3]]
    assert page.next_cursor == ids[3]
    rest = await store.list_jobs(JobFilter(type="a"), limit=2, cursor=page.next_cursor)
    assert [j.id for j in rest.jobs] == [ids[1]]
    assert rest.next_cursor is None
    assert len((await store.list_jobs(JobFilter(state=JobState.QUEUED))).jobs) == 7
    assert (await store.list_jobs(JobFilter(state=JobState.DEAD))).jobs == []
    now = await store.now()
    assert (await store.list_jobs(JobFilter(created_after=now + timedelta(1)))).jobs == []


async def test_list_filters_by_queue_type_and_state_and_pages(store: Store) -> None:
    made = [await store.enqueue(NewJob(type="a" if i % 2 else "b", queue="q")) for i in range(5)]
    await store.enqueue(NewJob(type="a", queue="elsewhere"))
    page = await store.list_jobs(JobFilter(queue="q"), limit=2)
    assert [j.id for j in page.jobs] == [made[4].id, made[3].id]
    assert page.next_cursor == made[3].id
    page2 = await store.list_jobs(JobFilter(queue="q"), limit=2, cursor=page.next_cursor)
    page3 = await store.list_jobs(JobFilter(queue="q"), limit=2, cursor=page2.next_cursor)
    assert [j.id for j in page2.jobs + page3.jobs] == [made[2].id, made[1].id, made[0].id]
    assert page3.next_cursor is None
    assert {j.id for j in (await store.list_jobs(JobFilter(queue="q", type="a"))).jobs} == {
        made[1].id,
        made[3].id,
    }
    await store.claim(["elsewhere"], "w1", 100, LEASE)
    leased = (await store.list_jobs(JobFilter(state=JobState.LEASED))).jobs
    assert [j.queue for j in leased] == ["elsewhere"]
    with pytest.raises(ConfigurationError):
        await store.list_jobs(limit=0)


async def test_cancel_queued_leased_and_finished(store: Store) -> None:
    queued = await store.enqueue(NewJob(type="t", queue="q"))
    cancelled = await store.cancel(queued.id)
    assert cancelled.state is JobState.CANCELLED and cancelled.finished_at is not None

    leased = await store.enqueue(NewJob(type="t"))
    await store.claim(["default"], "w1", 100, LEASE)
    flagged = await store.cancel(leased.id)
    assert flagged.state is JobState.LEASED and flagged.cancel_requested
    assert await store.cancel(leased.id) == flagged  # asking twice changes nothing

    with pytest.raises(InvalidTransition) as caught:
        await store.cancel(queued.id)
    assert caught.value.state == "cancelled"
    with pytest.raises(JobNotFound):
        await store.cancel(uuid4())


async def test_cancel_decides_on_the_state_it_locked_not_the_one_it_read(  # sync: skip
    async_store: Store, db_url: str
) -> None:
    # One decision, one statement: while another transaction holds the job's
    # row and turns it from queued to leased, cancel waits for the row and
    # then decides on the state it finds (a cancel request), never on the
    # queued state it could have read before the lock was granted.
    job = await async_store.enqueue(NewJob(type="t"))
    async with await psycopg.AsyncConnection.connect(db_url) as holder:
        async with holder.transaction():
            await holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE", (job.id,))
            cancel = asyncio.ensure_future(async_store.cancel(job.id))
            async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as probe:

                async def cancel_waits_for_the_row() -> bool:
                    cur = await probe.execute(
                        "SELECT count(*) FROM pg_stat_activity"
                        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
                    )
                    row = await cur.fetchone()
                    return bool(row and row[0])

                await eventually(cancel_waits_for_the_row)
            await holder.execute(
                "UPDATE jobs SET state = 'leased', attempts = 1, lease_owner = 'w1',"
                " lease_expires_at = now() + interval '1 minute' WHERE id = %s",
                (job.id,),
            )
        flagged = await cancel
    assert flagged.state is JobState.LEASED and flagged.cancel_requested
    assert [e.kind for e in await async_store.events(job.id)][-1] == "cancel_requested"


async def test_retry_dead_and_cancelled_only(
    store: Store, listener: psycopg.Connection[Any]
) -> None:
    job = await store.enqueue(NewJob(type="t", max_attempts=1))
    (claimed,) = await store.claim(["default"], "w1", 100, LEASE)
    await store.fail(claimed, "w1", "boom")
    assert (await store.get(job.id)).state is JobState.DEAD
    notified(listener)
    retried = await store.retry(job.id)
    assert retried.state is JobState.QUEUED
    assert retried.max_attempts == 1 and retried.attempts == 0
    assert notified(listener) == ["default"]
    with pytest.raises(InvalidTransition, match="retry"):
        await store.retry(job.id)
    await store.cancel(job.id)
    assert (await store.retry(job.id)).state is JobState.QUEUED
    with pytest.raises(JobNotFound):
        await store.retry(uuid4())


async def test_depth_counts_per_queue_and_state(store: Store) -> None:
    assert await store.depth() == []
    for queue in ("a", "a", "b"):
        await store.enqueue(NewJob(type="t", queue=queue))
    await store.claim(["b"], "w1", 100, LEASE)
    depth = {(d.queue, d.state): d.count for d in await store.depth()}
    assert depth == {("a", JobState.QUEUED): 2, ("b", JobState.LEASED): 1}


async def test_cancel_queued_ends_cancelled_now(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    cancelled = await store.cancel(job.id)
    assert cancelled.state is JobState.CANCELLED
    assert cancelled.finished_at is not None
    assert await store.claim(["default"], "w1", 1, LEASE) == []


async def test_cancel_leased_requests_cancel(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    claimed = await claim_one(store)
    flagged = await store.cancel(claimed.id)
    assert flagged.state is JobState.LEASED
    assert flagged.cancel_requested


async def test_cancel_of_finished_job_is_a_clear_error(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    done = await store.complete(await claim_one(store), "w1")
    with pytest.raises(InvalidTransition, match="succeeded"):
        await store.cancel(done.id)


async def test_retry_puts_dead_job_back_due_now(store: Store, db_url: str) -> None:
    job = await store.enqueue(NewJob(type="t", max_attempts=1, idempotency_key="once"))
    dead = await store.fail(await claim_one(store), "w1", "boom")
    assert dead.state is JobState.DEAD
    retried = await store.retry(job.id)
    assert retried.state is JobState.QUEUED
    assert retried.finished_at is None
    assert (retried.attempts, retried.max_attempts) == (0, 1)
    again = await claim_one(store)
    assert again.id == job.id and again.attempts == 1
    # The body is unchanged, so a replay of the original enqueue still replays.
    replay = await store.enqueue(NewJob(type="t", max_attempts=1, idempotency_key="once"))
    assert replay.id == job.id
    with pytest.raises(InvalidTransition):
        await store.retry(job.id)


async def test_purge_deletes_old_finished_jobs_in_batches(store: Store, db_url: str) -> None:
    # Finished in each of the three terminal states, more of each than a batch.
    await store.enqueue_batch([NewJob(type="t", max_attempts=1) for _ in range(25)])
    for index, job in enumerate(await store.claim(["default"], "w1", 25, LEASE)):
        if index < 13:
            await store.complete(job, "w1")
        else:
            await store.fail(job, "w1", "boom")
    for cancelled in await store.enqueue_batch([NewJob(type="t") for _ in range(11)]):
        assert isinstance(cancelled, Job)
        await store.cancel(cancelled.id)
    keep = await store.enqueue(NewJob(type="t"))
    states = {(d.state, d.count) for d in await store.depth()}
    assert states == {
        (JobState.SUCCEEDED, 13),
        (JobState.DEAD, 12),
        (JobState.CANCELLED, 11),
        (JobState.QUEUED, 1),
    }
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE finished_at IS NOT NULL"
        )
    assert await store.purge(timedelta(days=1), batch_size=10) == 36
    assert [j.id for j in (await store.list_jobs()).jobs] == [keep.id]
    with psycopg.connect(db_url) as conn:
        (orphans,) = conn.execute(
            "SELECT count(*) FROM job_events WHERE job_id <> %s", (keep.id,)
        ).fetchone() or (None,)
        (ledger,) = conn.execute("SELECT count(*) FROM processed_effects").fetchone() or (None,)
    assert orphans == 0
    assert ledger == 0


def ledger_rows(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        (count,) = conn.execute("SELECT count(*) FROM processed_effects").fetchone() or (0,)
    return int(count)


async def test_a_completion_without_a_callback_writes_no_ledger_row(
    store: Store, db_url: str
) -> None:
    await store.enqueue_batch([NewJob(type="t") for _ in range(3)])
    claimed = await store.claim(["default"], "w1", 3, LEASE)
    await store.complete(claimed[0], "w1")
    await store.record_outcomes("w1", [Outcome(job=j) for j in claimed[1:]])
    assert ledger_rows(db_url) == 0


async def test_purge_keeps_the_ledger_so_a_replayed_key_does_not_rerun_its_effect(
    store: Store, effects_table: str
) -> None:
    job = await store.enqueue(NewJob(type="t", idempotency_key="pay-1"))
    await store.complete(await claim_one(store), "w1", write_effect(job))
    with psycopg.connect(effects_table, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET finished_at = now() - interval '2 days'")
    assert await store.purge(timedelta(days=1)) == 1
    assert ledger_rows(effects_table) == 1
    replay = await store.enqueue(NewJob(type="t", idempotency_key="pay-1"))
    assert replay.id != job.id  # the old job is gone: a new one is stored
    done = await store.complete(await claim_one(store), "w1", write_effect(replay, "again"))
    assert done.state is JobState.SUCCEEDED
    assert effect_rows(effects_table) == [job.id]


async def test_prune_effects_removes_old_rows_of_gone_jobs_only(
    store: Store, effects_table: str
) -> None:
    gone = await store.enqueue(NewJob(type="t", queue="a"))
    kept = await store.enqueue(NewJob(type="t", queue="b"))
    await store.complete(await claim_one(store, queue="a"), "w1", write_effect(gone))
    await store.complete(await claim_one(store, queue="b"), "w1", write_effect(kept))
    with psycopg.connect(effects_table, autocommit=True) as conn:
        conn.execute("UPDATE processed_effects SET created_at = now() - interval '40 days'")
        conn.execute("DELETE FROM jobs WHERE id = %s", (gone.id,))
    assert await store.prune_effects(timedelta(days=90)) == 0
    assert await store.prune_effects(timedelta(days=30)) == 1
    assert await store.effect_done(kept)
    assert not await store.effect_done(gone)


async def test_prune_events_by_age(store: Store, db_url: str) -> None:
    job = await store.enqueue(NewJob(type="t"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE job_events SET at = now() - interval '3 days'")
    await store.cancel(job.id)
    assert await store.prune_events(timedelta(days=1)) == 1
    assert [e.kind for e in await store.events(job.id)] == ["cancelled"]


async def test_purge_and_pruning_measure_age_from_a_pinned_clock(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    await store.complete(await claim_one(store), "w1")
    assert await store.purge(timedelta(days=1)) == 0
    assert await store.prune_events(timedelta(days=1)) == 0
    later = await store.now() + timedelta(days=2)
    assert await store.prune_events(timedelta(days=1), now=later) == 3
    assert await store.purge(timedelta(days=1), now=later) == 1


async def test_now_is_database_time_in_utc(store: Store) -> None:
    now = await store.now()
    assert now.utcoffset() == timedelta(0)


# -- schedules -------------------------------------------------------------------------


async def test_schedule_lifecycle(store: Store) -> None:
    made = await store.create_schedule(
        NewSchedule(name="nightly", type="report", cron="0 3 * * *", timezone="Europe/Berlin")
    )
    assert made.next_run_at > await store.now()
    with pytest.raises(InvalidSchedule):
        await store.create_schedule(NewSchedule(name="nightly", type="x", cron="* * * * *"))
    with pytest.raises(InvalidSchedule):
        await store.create_schedule(NewSchedule(name="bad", type="x", cron="61 * * * *"))
    with pytest.raises(InvalidSchedule, match="Mars/Olympus"):
        await store.create_schedule(
            NewSchedule(name="bad", type="x", every=timedelta(1), timezone="Mars/Olympus")
        )
    paused = await store.pause_schedule("nightly")
    assert paused.paused
    resumed = await store.resume_schedule("nightly")
    assert not resumed.paused
    changed = await store.update_schedule("nightly", SchedulePatch(every=timedelta(minutes=5)))
    assert changed.cron is None and changed.every == timedelta(minutes=5)
    assert [s.name for s in await store.list_schedules()] == ["nightly"]
    await store.delete_schedule("nightly")
    assert await store.list_schedules() == []


async def test_run_schedule_now_and_clear_queue(store: Store) -> None:
    made = await store.create_schedule(
        NewSchedule(name="a/b", type="t", every=timedelta(hours=1), queue="q/1")
    )
    job = await store.run_schedule_now("a/b", actor="ops")
    assert (job.queue, job.type, job.state) == ("q/1", "t", JobState.QUEUED)
    assert (await store.get_schedule("a/b")).next_run_at == made.next_run_at
    with pytest.raises(ScheduleNotFound):
        await store.run_schedule_now("a")
    await store.enqueue(NewJob(type="t", queue="q"))
    with pytest.raises(ConfirmationNeeded) as asked:
        await store.clear_queue("q/1", confirm=None)
    assert asked.value.count == 1
    assert await store.clear_queue("q/1", confirm=1) == 1
    assert [j.queue for j in (await store.list_jobs(limit=5)).jobs] == ["q"]


async def test_due_schedules_materialise_once_and_advance(store: Store, db_url: str) -> None:
    sched = await store.create_schedule(
        NewSchedule(name="tick", type="tick", every=timedelta(minutes=1))
    )
    # Pretend the scheduler was down for an hour: one run, not sixty.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("UPDATE schedules SET next_run_at = now() - interval '1 hour'")
    now = await store.now()
    (job,) = await store.due_schedules(now)
    assert job.type == "tick"
    assert job.idempotency_key is not None and job.idempotency_key.startswith(f"sched:{sched.id}:")
    assert await store.due_schedules(now) == []
    after = await store.get_schedule("tick")
    assert now < after.next_run_at <= now + timedelta(minutes=1)


async def test_two_concurrent_due_schedules_never_materialise_a_run_twice(
    store: Store, stores: Stores, db_url: str
) -> None:
    for i in range(20):
        await store.create_schedule(
            NewSchedule(name=f"s{i}", type="tick", every=timedelta(seconds=1))
        )
    other = await stores.make(own_pool=True)
    for _ in range(5):
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute("UPDATE schedules SET next_run_at = now() - interval '1 second'")
        now = await store.now()
        await concurrently(partial(store.due_schedules, now), partial(other.due_schedules, now))
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT idempotency_key, count(*) FROM jobs GROUP BY 1 HAVING count(*) > 1")
        ).fetchall()
        (total,) = conn.execute("SELECT count(*) FROM jobs").fetchone() or (0,)
    assert rows == []
    assert total >= 20


async def test_release_hands_a_job_back_without_spending_its_attempt(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t", max_attempts=1))
    claimed = await claim_one(store)
    released = await store.release(claimed, "w1", "shutting down")
    assert released.state is JobState.QUEUED
    assert released.attempts == 0
    assert released.lease_owner is None
    again = await claim_one(store)
    assert again.id == job.id and again.attempts == 1
    with pytest.raises(LeaseLost):
        await store.release(again, "w2", "not mine")
    await store.cancel(job.id)
    assert (await store.release(again, "w1", "bye")).state is JobState.CANCELLED
    kinds = [e.kind for e in await store.events(job.id)]
    assert kinds == ["enqueued", "claimed", "released", "claimed", "cancel_requested", "cancelled"]


async def test_queue_controls_through_either_store(stores: Stores) -> None:
    store = await stores.make()
    await store.enqueue_batch([NewJob(type="t", queue="q") for _ in range(5)])
    assert (await store.pause_queue("q")).paused
    assert await store.claim(["q"], "w", 5, LEASE) == []
    await store.resume_queue("q")
    limited = await store.set_queue_limits("q", concurrency=2, rate=(10, timedelta(seconds=60)))
    assert (limited.concurrency_limit, limited.rate_limit) == (2, 10)
    assert len(await store.claim(["q"], "w", 5, LEASE)) == 2
    (info,) = await store.list_queues()
    assert (info.name, info.queued, info.leased, info.concurrency_limit) == ("q", 3, 2, 2)
    assert (await store.clear_queue_limits("q")).concurrency_limit is None
    assert len(await store.claim(["q"], "w", 5, LEASE)) == 3
