"""Jobs a worker can never run (issue 27, item 10): refused at enqueue by a producer that
knows the registry, and on a worker retried on a bounded policy, then dead with the cause.

Before, a Client holding a registry accepted any type, and a worker retried an
unknown type or a payload that does not validate on the job's own backoff:
25 attempts over about 13 hours.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from pydantic import BaseModel

from jobrun import Client, Config, InvalidJob, Job, JobState, NewJob
from jobrun.errors import ConfigurationError
from jobrun.postgres import SyncProducer
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry
from jobrun.testing import eventually
from jobrun.unrunnable import UnrunnableRetry


class Email(BaseModel):
    to: str


def app_registry() -> Registry:
    registry = Registry()

    @registry.handler("email", payload=Email)
    async def email(ctx: JobContext, payload: Email) -> None:
        pass

    @registry.handler("ping")
    async def ping(ctx: JobContext, payload: Any) -> None:
        pass

    return registry


def count_jobs(db_url: str) -> int:
    with psycopg.connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()  # test fixture SQL
    assert row is not None
    return int(row[0])


# -- refused at enqueue ------------------------------------------------------------------


async def test_a_client_with_a_registry_refuses_unknown_types_and_bad_payloads(
    db_url: str,
) -> None:
    async with Client(app_registry(), database_url=db_url) as client:
        unknown = "job type 'emial' is not registered.*registered types: 'email', 'ping'"
        with pytest.raises(InvalidJob, match=unknown):
            await client.enqueue(NewJob(type="emial", payload={"to": "a@b"}))
        with pytest.raises(InvalidJob, match=unknown):
            await client.enqueue_batch([NewJob(type="ping"), NewJob(type="emial")])
        with pytest.raises(InvalidJob, match=unknown):
            await client.enqueue_many("emial", [{"to": "a@b"}])
        with pytest.raises(InvalidJob, match="does not match Email"):
            await client.enqueue(NewJob(type="email", payload={"too": "a@b"}))
        assert count_jobs(db_url) == 0
        # What the registry knows still goes in.
        await client.enqueue(NewJob(type="email", payload={"to": "a@b"}))
        await client.enqueue_many("ping", [{}, {}])
    assert count_jobs(db_url) == 3
    # A producer-only client (no registry) enqueues for any application's workers.
    async with Client(database_url=db_url) as producer:
        await producer.enqueue(NewJob(type="another.apps.job"))
    assert count_jobs(db_url) == 4


def test_a_sync_producer_given_job_types_refuses_others(db_url: str) -> None:
    with SyncProducer(db_url, job_types=app_registry()) as producer:
        with pytest.raises(InvalidJob, match="'emial' is not registered"):
            producer.enqueue(NewJob(type="emial"))
        producer.enqueue(NewJob(type="ping"))
    assert count_jobs(db_url) == 1


# -- the worker's bounded policy ------------------------------------------------------------


@pytest.mark.parametrize(
    ("job", "cause"),
    [
        (NewJob(type="emial", payload={"to": "a@b"}), "no handler is registered for job type"),
        (NewJob(type="email", payload={"too": "a@b"}), "payload of job type 'email' does not"),
    ],
    ids=["unknown type", "invalid payload"],
)
async def test_a_job_the_worker_cannot_run_retries_on_the_bounded_policy_then_dies(
    db_url: str, caplog: pytest.LogCaptureFixture, job: NewJob, cause: str
) -> None:
    # Written as by a newer producer, whose registry this worker does not share.
    async with Client(database_url=db_url) as producer:
        stored = await producer.enqueue(job)
    assert stored.max_attempts == 25
    config = Config(
        database_url=db_url,
        poll=timedelta(milliseconds=50),
        unrunnable_attempts=3,
        unrunnable_retry=timedelta(milliseconds=300),
        maintenance=False,
    )
    caplog.set_level(logging.INFO, logger="jobrun.worker")
    async with Client(app_registry(), config) as client:
        stop = asyncio.Event()
        worker = asyncio.create_task(client.run_worker(stop=stop))

        async def dead() -> Job | None:
            found = await client.store.get(stored.id)
            return found if found.state is JobState.DEAD else None

        try:
            found = await eventually(dead, what="the job dead")
        finally:
            stop.set()
            await worker
        events = await client.store.events(stored.id)
    # Three attempts, not the job's 25; dead with the cause as its last error.
    assert found.attempts == 3
    assert found.last_error is not None and found.last_error.startswith(cause), found.last_error
    assert "attempt 3 of at most 3" in found.last_error
    assert [e.kind for e in events] == ["enqueued"] + ["claimed", "failed"] * 2 + [
        "claimed",
        "dead",
    ]
    claims = [e.at for e in events if e.kind == "claimed"]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(claims)]
    assert all(gap >= 0.3 for gap in gaps), gaps  # the policy's wait, database clock
    # One line per attempt, naming the cause.
    lines = [r.getMessage() for r in caplog.records if str(stored.id) in r.getMessage()]
    assert len(lines) == 3, lines
    assert all(cause in line for line in lines), lines
    assert "failed:dead" in lines[-1]


async def test_the_bounded_policy_never_exceeds_the_jobs_own_attempts(db_url: str) -> None:
    async with Client(database_url=db_url) as producer:
        stored = await producer.enqueue(NewJob(type="emial", max_attempts=1))
    async with Client(Registry(), database_url=db_url, poll=timedelta(milliseconds=50)) as client:
        await client.run_worker(drain=True)
        found = await client.store.get(stored.id)
    assert (found.state, found.attempts) == (JobState.DEAD, 1)


async def test_a_dead_unrunnable_job_can_be_retried_by_an_operator(pool: Any) -> None:
    # The policy bounds attempts since the job was queued, as the job's own limit
    # does: a retry after the deploy starts a job that can run.
    store = Store(pool)
    stored = await store.enqueue(NewJob(type="emial", max_attempts=1))
    (claimed,) = await store.claim(["default"], "w", 1, timedelta(minutes=1))
    policy = UnrunnableRetry(attempts=1, retry=timedelta(minutes=20))
    (dead,) = await store.record_outcomes("w", [policy.outcome(claimed, "no handler")])
    assert not isinstance(dead, Exception) and dead.state is JobState.DEAD
    assert (await store.retry(stored.id)).state is JobState.QUEUED


def test_the_policy_is_configured_like_every_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBRUN_UNRUNNABLE_ATTEMPTS", "2")
    monkeypatch.setenv("JOBRUN_UNRUNNABLE_RETRY", "90s")
    assert Config().unrunnable == UnrunnableRetry(attempts=2, retry=timedelta(seconds=90))
    monkeypatch.delenv("JOBRUN_UNRUNNABLE_ATTEMPTS")
    monkeypatch.delenv("JOBRUN_UNRUNNABLE_RETRY")
    assert Config().unrunnable == UnrunnableRetry(attempts=4, retry=timedelta(minutes=20))
    with pytest.raises(ConfigurationError, match="unrunnable_attempts"):
        Config(unrunnable_attempts=0)
    with pytest.raises(ConfigurationError, match="unrunnable_retry"):
        Config(unrunnable_retry=timedelta(0))
