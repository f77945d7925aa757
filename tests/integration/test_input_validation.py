"""Bad input through the Python API: a JobrunError (or the model's ValidationError), never
a raw psycopg error, OverflowError or RecursionError, and nothing written.

Models built without validation (``model_copy(update=...)``, ``model_construct``)
reach the store unchecked; the store's shared checks refuse them with InvalidJob.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from jobrun.domain import NewJob, NewSchedule, SchedulePatch
from jobrun.errors import ConfigurationError, InvalidJob, InvalidSchedule
from jobrun.postgres import Pool, SyncProducer
from jobrun.postgres.store import Store

LONE_SURROGATE = {"s": "\ud800"}
FAR_DELAY = timedelta(days=3_000_000)  # beyond the year 9999 from now


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def unchecked(**update: Any) -> NewJob:
    """A NewJob whose fields were changed without validation, as model_copy does."""
    return NewJob(type="t").model_copy(update=update)


def count(db_url: str, table: str = "jobs") -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()  # test fixture SQL
    assert row is not None
    return int(row[0])


@pytest.fixture
async def store(pool: Pool) -> Store:
    return Store(pool)


@pytest.fixture
def producer(db_url: str) -> Iterator[SyncProducer]:
    with SyncProducer(db_url) as made:
        yield made


# -- item 6: lone surrogates, deep payloads, NUL in text fields -------------------------


@pytest.mark.parametrize("key", [None, "k"])
async def test_lone_surrogate_payload_is_invalid_job(
    store: Store, db_url: str, key: str | None
) -> None:
    with pytest.raises(InvalidJob, match="surrogate"):
        await store.enqueue(NewJob(type="t", payload=LONE_SURROGATE, idempotency_key=key))
    with pytest.raises(InvalidJob, match="surrogate"):
        await store.enqueue_batch(
            [NewJob(type="t"), NewJob(type="t", payload=LONE_SURROGATE, idempotency_key=key)]
        )
    assert count(db_url) == 0


def test_lone_surrogate_payload_is_invalid_job_in_the_sync_producer(
    producer: SyncProducer, db_url: str
) -> None:
    with pytest.raises(InvalidJob, match="surrogate"):
        producer.enqueue(NewJob(type="t", payload=LONE_SURROGATE))
    with pytest.raises(InvalidJob, match="surrogate"):
        producer.enqueue_batch([NewJob(type="t", payload=LONE_SURROGATE)])
    assert count(db_url) == 0


async def test_lone_surrogate_schedule_payload_is_refused(store: Store, db_url: str) -> None:
    with pytest.raises(InvalidJob, match="surrogate"):
        await store.create_schedule(
            NewSchedule(name="s", type="t", every=timedelta(minutes=1), payload=LONE_SURROGATE)
        )
    assert count(db_url, "schedules") == 0


async def test_deeply_nested_payloads_are_invalid_job(store: Store, db_url: str) -> None:
    # 150 levels passes pydantic's own guard, so the store's limit decides.
    with pytest.raises(InvalidJob, match="nested more than 100 levels"):
        await store.enqueue(NewJob(type="t", payload=nested(150)))
    with pytest.raises(InvalidJob, match="nested more than 100 levels"):
        await store.enqueue_batch([NewJob(type="t", payload=nested(150))])
    with pytest.raises(InvalidJob, match="nested more than 100 levels"):
        await store.enqueue(unchecked(payload=nested(5000)))
    with pytest.raises(InvalidJob, match="100 levels"):
        NewJob(type="t", payload=nested(5000))
    assert count(db_url) == 0


@pytest.mark.parametrize("field", ["type", "queue", "idempotency_key"])
@pytest.mark.parametrize("bad", ["a\x00b", "a\udcffb"])
async def test_nul_or_surrogate_in_text_fields_is_invalid_job(
    store: Store, producer: SyncProducer, db_url: str, field: str, bad: str
) -> None:
    with pytest.raises(InvalidJob, match=field):
        NewJob(**{"type": "t", field: bad})
    with pytest.raises(InvalidJob, match=field):
        await store.enqueue(unchecked(**{field: bad}))
    with pytest.raises(InvalidJob, match=field):
        await store.enqueue_batch([NewJob(type="t"), unchecked(**{field: bad})])
    with pytest.raises(InvalidJob, match=field):
        producer.enqueue(unchecked(**{field: bad}))
    with pytest.raises(InvalidJob, match=field):
        producer.enqueue_batch([unchecked(**{field: bad})])
    assert count(db_url) == 0


# -- item 7: far-future delays and times, purge ages ------------------------------------


async def test_far_future_delay_and_run_at_are_invalid_job(
    store: Store, producer: SyncProducer, db_url: str
) -> None:
    with pytest.raises(InvalidJob, match="delay must be at most 100 years"):
        NewJob(type="t", delay=FAR_DELAY)
    late = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
    with pytest.raises(InvalidJob, match="run_at must be before 9999-01-01"):
        NewJob(type="t", run_at=late)
    for bad in (unchecked(delay=FAR_DELAY), unchecked(run_at=late)):
        with pytest.raises(InvalidJob, match=r"delay|run_at"):
            await store.enqueue(bad)
        with pytest.raises(InvalidJob, match=r"delay|run_at"):
            await store.enqueue_batch([NewJob(type="t"), bad])
        with pytest.raises(InvalidJob, match=r"delay|run_at"):
            producer.enqueue_batch([bad])
    assert count(db_url) == 0


async def test_latest_allowed_run_at_round_trips(store: Store) -> None:
    latest = datetime(9998, 12, 31, 23, 59, tzinfo=UTC)
    (job,) = await store.enqueue_batch([NewJob(type="t", run_at=latest)])
    assert (await store.get(job.id)).run_at == latest


async def test_purge_older_than_is_bounded(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="older_than must be at most 100 years"):
        await store.purge(timedelta(days=99_999_999))
    with pytest.raises(ConfigurationError, match="older_than must not be negative"):
        await store.purge(timedelta(days=-1))
    with pytest.raises(ConfigurationError, match="older_than must be at most 100 years"):
        await store.prune_events(timedelta(days=99_999_999))
    assert await store.purge(timedelta(days=36_525)) == 0


# -- item 8: max_attempts and priority bounded in the model ------------------------------


async def test_max_attempts_and_priority_out_of_range_are_refused(
    store: Store, db_url: str
) -> None:
    with pytest.raises(InvalidJob, match="10000"):
        NewJob(type="t", max_attempts=3_000_000_000)
    for bad in (unchecked(max_attempts=3_000_000_000), unchecked(priority=99_999)):
        with pytest.raises(InvalidJob, match=r"max_attempts|priority"):
            await store.enqueue(bad)
        with pytest.raises(InvalidJob, match=r"max_attempts|priority"):
            await store.enqueue_batch([bad])
    assert count(db_url) == 0


async def test_schedule_patch_priority_is_bounded(store: Store) -> None:
    await store.create_schedule(NewSchedule(name="s", type="t", every=timedelta(minutes=1)))
    with pytest.raises(InvalidSchedule, match="32767"):
        SchedulePatch(priority=99_999)
    with pytest.raises(InvalidSchedule, match="10000"):
        SchedulePatch(max_attempts=3_000_000_000)
    schedule = await store.get_schedule("s")
    assert schedule.priority == 0


# -- item 11: an escaped backslash is not a NUL ------------------------------------------


async def test_backslash_u0000_text_is_stored_as_given(
    store: Store, producer: SyncProducer
) -> None:
    payload = {"path": "C:\\u0000dir"}
    job = await store.enqueue(NewJob(type="t", payload=payload))
    assert (await store.get(job.id)).payload == payload
    keyed = await store.enqueue(NewJob(type="t", payload=payload, idempotency_key="k"))
    again = await store.enqueue(NewJob(type="t", payload=payload, idempotency_key="k"))
    assert again.id == keyed.id
    (batched,) = await store.enqueue_batch([NewJob(type="t", payload=payload)])
    assert not isinstance(batched, Exception)
    assert (await store.get(batched.id)).payload == payload
    assert producer.enqueue(NewJob(type="t", payload=payload)).payload == payload
    schedule = await store.create_schedule(
        NewSchedule(name="p", type="t", every=timedelta(minutes=1), payload=payload)
    )
    assert schedule.payload == payload


async def test_a_real_nul_in_a_payload_is_still_refused(store: Store, db_url: str) -> None:
    with pytest.raises(InvalidJob, match="NUL"):
        await store.enqueue(NewJob(type="t", payload={"path": "C:\x00dir"}))
    with pytest.raises(InvalidJob, match="NUL"):
        await store.enqueue_batch([NewJob(type="t", payload={"k\x00": 1})])
    assert count(db_url) == 0


async def test_a_job_id_already_stored_is_invalid_job_naming_it(
    store: Store, producer: SyncProducer, db_url: str
) -> None:
    stored = await store.enqueue(NewJob(type="t"))
    again = NewJob(type="t", id=stored.id)
    with pytest.raises(InvalidJob, match=f"same id is already stored.*{stored.id}"):
        await store.enqueue(again)
    with pytest.raises(InvalidJob, match=f"same id is already stored.*{stored.id}"):
        await store.enqueue_batch([NewJob(type="t"), again])
    with pytest.raises(InvalidJob, match=f"same id is already stored.*{stored.id}"):
        producer.enqueue(again)
    with pytest.raises(InvalidJob, match=f"same id is already stored.*{stored.id}"):
        producer.enqueue_batch([again, NewJob(type="t")])
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        with pytest.raises(InvalidJob, match=f"same id is already stored.*{stored.id}"):
            await store.enqueue(again, conn=conn)
    twin = NewJob(type="t")
    with pytest.raises(InvalidJob, match=f"same id is already stored.*{twin.id}"):
        await store.enqueue_batch([twin, twin])
    # Each refusal wrote nothing: the batches' other jobs went with them.
    assert count(db_url) == 1


# -- issue 27, item 11: a malformed job id is InvalidJob, never a driver error ---------------

BAD_IDS = ["not-a-uuid", "", "0190abcd-0000-7000-8000-00000000000g", 12345]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_a_malformed_job_id_is_invalid_job_in_every_call_taking_one(
    store: Store, producer: SyncProducer, db_url: str, bad: Any
) -> None:
    stored = await store.enqueue(NewJob(type="t"))
    calls: list[tuple[str, Callable[[], Any]]] = [
        ("get", lambda: store.get(bad)),
        ("cancel", lambda: store.cancel(bad)),
        ("retry", lambda: store.retry(bad)),
        ("events", lambda: store.events(bad)),
        ("list_jobs", lambda: store.list_jobs(cursor=bad)),
    ]
    for name, call in calls:
        with pytest.raises(InvalidJob, match="is not a job id"):
            await call()
        with pytest.raises(InvalidJob, match="is not a job id"):
            if name == "list_jobs":
                producer.list_jobs(cursor=bad)
            else:
                getattr(producer, name)(bad)
    # Nothing changed: the one job is still queued, with only its enqueue recorded.
    assert (await store.get(str(stored.id))).state == stored.state
    assert [e.kind for e in await store.events(stored.id)] == ["enqueued"]
    assert count(db_url) == 1


async def test_a_job_id_as_text_still_finds_the_job(store: Store, producer: SyncProducer) -> None:
    stored = await store.enqueue(NewJob(type="t"))
    assert (await store.get(str(stored.id))).id == stored.id
    assert producer.get(f" {stored.id} ").id == stored.id
    assert (await store.cancel(str(stored.id))).state.value == "cancelled"
