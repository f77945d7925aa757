"""The Client as a service embeds it: one Config, everything wired, real PostgreSQL."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from pydantic import BaseModel

from jobrun import (
    Backoff,
    BackoffKind,
    Cancel,
    Client,
    Config,
    ConfigurationError,
    InvalidJob,
    JobContext,
    JobState,
    NewJob,
    Registry,
    SchemaMissing,
    Snooze,
)
from jobrun.testing import eventually

FAST = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=10))


def states(db_url: str) -> Counter[str]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT state::text, count(*) FROM jobs GROUP BY 1").fetchall()
    return Counter({state: count for state, count in rows})


def effect_ids(db_url: str) -> list[UUID]:
    with psycopg.connect(db_url) as conn:
        return [r[0] for r in conn.execute("SELECT job_id FROM client_effects ORDER BY job_id")]


async def offering(db_url: str) -> bool:
    async with await psycopg.AsyncConnection.connect(db_url) as conn:
        cur = await conn.execute("SELECT count(*) FROM worker_offers WHERE expires_at > now()")
        row = await cur.fetchone()
    return row is not None and row[0] > 0


async def test_run_worker_drain_returns_by_itself_over_a_mixed_workload(db_url: str) -> None:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE client_effects (job_id uuid PRIMARY KEY)")
    registry = Registry()
    snoozed: set[UUID] = set()
    lock = threading.Lock()

    @registry.handler("effect")
    async def effect(ctx: JobContext, payload: Any) -> Any:
        async def commit(conn: Any) -> None:
            await conn.execute("INSERT INTO client_effects (job_id) VALUES (%s)", (ctx.job.id,))

        return commit

    @registry.handler("sync")
    def sync_handler(ctx: JobContext, payload: Any) -> None:
        time.sleep(0.01)

    @registry.handler("boom")
    async def boom(ctx: JobContext, payload: Any) -> None:
        raise RuntimeError("always fails")

    @registry.handler("flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        if ctx.attempt < 2:
            raise RuntimeError("first attempt fails")

    @registry.handler("stop")
    async def stop(ctx: JobContext, payload: Any) -> None:
        raise Cancel("not needed")

    @registry.handler("later")
    def later(ctx: JobContext, payload: Any) -> None:
        with lock:
            if ctx.job.id not in snoozed:
                snoozed.add(ctx.job.id)
                raise Snooze(timedelta(0))

    # A client holding a registry refuses a type it does not register (issue 27,
    # item 10): the unknown type comes from a producer without one.
    unknown = NewJob(type="unknown", max_attempts=1)
    async with Client(database_url=db_url) as producer:
        await producer.enqueue(unknown)
    async with Client(registry, database_url=db_url, concurrency=8, poll="5s") as client:
        jobs = [NewJob(type="effect", payload={"i": i}) for i in range(20)]
        jobs += [NewJob(type="sync", payload={"i": i}) for i in range(10)]
        jobs += [NewJob(type="boom", max_attempts=1, payload={"i": i}) for i in range(3)]
        jobs += [NewJob(type="flaky", backoff=FAST, payload={"i": i}) for i in range(3)]
        jobs += [NewJob(type="stop", payload={"i": i}) for i in range(2)]
        jobs += [NewJob(type="later", payload={"i": i}) for i in range(2)]
        await client.enqueue_batch(jobs)
        jobs.append(unknown)
        began = time.monotonic()
        stats = await asyncio.wait_for(client.run_worker(drain=True), 60)
        took = time.monotonic() - began
    counts = states(db_url)
    # flaky jobs may still wait out their 10 ms backoff when the drain ends;
    # everything else is finished.
    assert counts["dead"] == 4  # 3 boom + 1 unknown type
    assert counts["cancelled"] == 2
    assert counts["succeeded"] + counts["queued"] == 20 + 10 + 3 + 2
    assert counts["queued"] <= 3
    assert counts["leased"] == 0
    assert len(effect_ids(db_url)) == 20
    assert len(snoozed) == 2
    assert stats.jobs >= len(jobs)
    # It stopped because the queues were drained, not because the 5 s poll ran out.
    assert took < 30


async def test_the_client_worker_wakes_on_notify(db_url: str) -> None:
    registry = Registry()
    started = asyncio.Event()

    @registry.handler("ping")
    async def ping(ctx: JobContext, payload: Any) -> None:
        started.set()

    stop = asyncio.Event()
    async with Client(registry, database_url=db_url, poll="60s") as client:
        task = asyncio.create_task(client.run_worker(stop=stop))
        # The first empty claim is done (it wrote the worker's handoff offer):
        # the worker waits 60 s now.
        await eventually(lambda: offering(db_url), what="the worker's first claim")
        await client.enqueue(NewJob(type="ping"))
        # Woken by the notification, not by the 60 s poll.
        await asyncio.wait_for(started.wait(), 10)
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_run_worker_on_a_database_never_migrated_raises_schema_missing(
    empty_db_url: str,
) -> None:
    async with Client(database_url=empty_db_url) as client:
        with pytest.raises(SchemaMissing, match="jobrun migrate"):
            await client.run_worker(drain=True)
        assert await client.migrate()
        assert (await client.run_worker(drain=True)).jobs == 0


async def test_a_typed_handler_payload_is_checked_at_enqueue(db_url: str) -> None:
    class Welcome(BaseModel):
        user_id: int

    registry = Registry()

    @registry.handler("welcome", payload=Welcome)
    async def welcome(ctx: JobContext, payload: Welcome) -> None:
        return None

    async with Client(registry, database_url=db_url) as client:
        with pytest.raises(InvalidJob, match="user_id"):
            await client.enqueue(NewJob(type="welcome", payload={"user_id": "seven"}))
        job = await client.enqueue(NewJob(type="welcome", payload={"user_id": 7}))
        assert job.state is JobState.QUEUED
    assert states(db_url) == Counter({"queued": 1})


async def test_a_client_that_is_not_open_says_so() -> None:
    client = Client(database_url="postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(ConfigurationError, match="not open"):
        _ = client.store


def test_a_config_passed_where_the_registry_goes_is_named() -> None:
    config = Config(database_url="postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(ConfigurationError, match=r"got Config: pass the settings as config="):
        Client(config)  # type: ignore[arg-type]


def test_config_reads_jobrun_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBRUN_CONCURRENCY", "7")
    monkeypatch.setenv("JOBRUN_LEASE", "1m")
    monkeypatch.setenv("JOBRUN_QUEUE", "mail, default")
    monkeypatch.setenv("JOBRUN_EVENT_MODE", "terminal")
    monkeypatch.setenv("JOBRUN_SCHEDULER", "true")
    monkeypatch.setenv("JOBRUN_CLAIM_AHEAD", "0s")
    config = Config()
    assert config.concurrency == 7
    assert config.lease == timedelta(minutes=1)
    assert config.heartbeat == timedelta(seconds=10)
    assert config.queues == ["mail", "default"]
    assert config.event_mode.value == "terminal"
    assert config.scheduler is True
    assert config.claim_ahead == timedelta(0)
    assert Config(claim_ahead="20ms").claim_ahead == timedelta(milliseconds=20)
    # An argument wins over the environment.
    assert Config(concurrency=3).concurrency == 3


@pytest.mark.parametrize(
    ("setting", "value", "needle"),
    [
        ("JOBRUN_CONCURRENCY", "0", "concurrency"),
        ("JOBRUN_LEASE", "30 parsecs", "duration"),
        ("JOBRUN_LEASE", "99999999999d", "100 years"),
        ("JOBRUN_HEARTBEAT", "20s", "third of the lease"),
        ("JOBRUN_RETRY_JITTER", "2", "retry_jitter"),
        ("JOBRUN_EVENT_MODE", "sometimes", "event_mode"),
        ("JOBRUN_CLAIM_AHEAD", "2m", "claim_ahead"),
        ("JOBRUN_CLAIM_AHEAD", "-1s", "claim_ahead: invalid duration"),
    ],
)
def test_bad_settings_raise_configuration_error_naming_them(
    monkeypatch: pytest.MonkeyPatch, setting: str, value: str, needle: str
) -> None:
    monkeypatch.setenv(setting, value)
    with pytest.raises(ConfigurationError, match=needle):
        Config()


def test_config_replace_validates_the_change() -> None:
    config = Config(concurrency=5)
    assert config.replace(concurrency=6).concurrency == 6
    with pytest.raises(ConfigurationError, match="concurrency"):
        config.replace(concurrency=-1)


@pytest.mark.parametrize(
    ("setting", "concurrency", "seen"),
    [
        (None, 100, 700),
        (10_000, 100, 10_000),
        (25_000, 100, 25_000),
        (10_000, 1000, 40_000),  # 40 per slot: the jobs in flight alone would fill 10,000
        (None, 1000, 700),
    ],
)
async def test_run_worker_raises_the_collector_threshold_while_it_runs(
    db_url: str, setting: int | None, concurrency: int, seen: int
) -> None:
    # The worker's collector tuning, as a user's process meets it: raised
    # while handlers run, the process's own thresholds back once it stops.
    registry = Registry()
    during: list[tuple[int, int, int]] = []

    @registry.handler("look")
    async def look(ctx: JobContext, payload: Any) -> None:
        during.append(gc.get_threshold())

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        async with Client(
            registry, database_url=db_url, gc_young_threshold=setting, concurrency=concurrency
        ) as client:
            await client.enqueue_batch([NewJob(type="look") for _ in range(3)])
            stats = await asyncio.wait_for(client.run_worker(drain=True), 60)
            assert stats.jobs == 3
            assert during == [(seen, 10, 10)] * 3
            assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)
