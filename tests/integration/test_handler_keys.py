"""Idempotency keys made by a job type's declared policy, on a real server (issue 30, item 5).

A handler declared with ``idempotency_key=`` keys the jobs enqueued without a
key, through every producer that holds its registry; the store's own rule
then makes equal keys one job (a replay returns the stored job, a different
body conflicts). The policy's own cases are tests/unit/test_key_policy.py.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from jobrun import Client, IdempotencyConflict, InvalidJob, JobContext, NewJob, Registry, SyncClient
from jobrun.testing import RecordingProducer


def make_registry() -> Registry:
    registry = Registry()

    @registry.handler("mail.digest", queue="mail", idempotency_key=("user_id", "day"))
    async def digest(ctx: JobContext, payload: Any) -> None:
        return None

    return registry


DAY = {"user_id": 7, "day": "2024-05-01"}
KEY = 'mail.digest:{"day":"2024-05-01","user_id":7}'


def keys(db_url: str) -> dict[str, int]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT idempotency_key, count(*) FROM jobs GROUP BY 1").fetchall()
    return {str(k): int(n) for k, n in rows}


async def test_client_keys_each_job_and_a_second_enqueue_replays_it(db_url: str) -> None:
    async with Client(make_registry(), database_url=db_url) as client:
        first = await client.enqueue(NewJob(type="mail.digest", payload=DAY))
        again = await client.enqueue(NewJob(type="mail.digest", payload=DAY))
        assert (first.idempotency_key, first.queue) == (KEY, "mail")
        assert again.id == first.id
        # Same user and day, another body: the store's rule says conflict.
        with pytest.raises(IdempotencyConflict):
            await client.enqueue(NewJob(type="mail.digest", payload={**DAY, "extra": 1}))
        batch = await client.enqueue_batch(
            [
                NewJob(type="mail.digest", payload=DAY),
                NewJob(type="mail.digest", payload={**DAY, "day": "2024-05-02"}),
                NewJob(type="mail.digest", payload=DAY, idempotency_key=None),
            ]
        )
        assert [getattr(j, "id", None) == first.id for j in batch] == [True, False, False]
        with pytest.raises(InvalidJob, match="enqueue them with enqueue_batch"):
            await client.enqueue_many("mail.digest", [DAY])
        with pytest.raises(InvalidJob, match="this payload has no 'day'"):
            await client.enqueue(NewJob(type="mail.digest", payload={"user_id": 1}))
    assert keys(db_url) == {KEY: 1, 'mail.digest:{"day":"2024-05-02","user_id":7}': 1, "None": 1}


def test_sync_client_keys_each_job_as_the_client_does(db_url: str) -> None:
    with SyncClient(make_registry(), database_url=db_url) as jobs:
        first = jobs.enqueue(NewJob(type="mail.digest", payload=DAY))
        again = jobs.enqueue(NewJob(type="mail.digest", payload=DAY))
        (batched,) = jobs.enqueue_batch([NewJob(type="mail.digest", payload=DAY)])
        with pytest.raises(InvalidJob, match="enqueue_batch"):
            jobs.enqueue_many("mail.digest", [DAY])
    assert first.idempotency_key == KEY
    assert again.id == first.id == getattr(batched, "id", None)
    assert keys(db_url) == {KEY: 1}


async def test_the_recording_producer_keys_jobs_as_a_client_holding_the_registry() -> None:
    recorder = RecordingProducer(make_registry())
    first = await recorder.enqueue(NewJob(type="mail.digest", payload=DAY))
    again = await recorder.enqueue(NewJob(type="mail.digest", payload=DAY))
    assert first.idempotency_key == KEY
    assert again.id == first.id
    assert len(recorder.jobs) == 1
    with pytest.raises(InvalidJob, match="enqueue_batch"):
        await recorder.enqueue_many("mail.digest", [DAY])
