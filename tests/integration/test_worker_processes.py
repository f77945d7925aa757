"""Workers as real processes: crashes, many workers on one queue, signals.

Each test starts ``worker_proc.py`` with ``subprocess`` on its own database and
checks the outcome in the database only: states, attempts, and the counters
the commit callbacks write (``n = 1`` per job means exactly once).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from jobrun.domain import Backoff, BackoffKind, JobState, NewJob
from jobrun.postgres import Pool
from jobrun.postgres.store import Store

SCRIPT = Path(__file__).with_name("worker_proc.py")


@pytest.fixture
async def store(pool: Pool) -> Store:
    async with pool.connection() as conn:
        await conn.execute("CREATE TABLE counters (job_id uuid PRIMARY KEY, n int NOT NULL)")
        await conn.execute("CREATE TABLE starts (job_id uuid NOT NULL, attempt int NOT NULL)")
    return Store(pool)


@pytest.fixture
def spawn(db_url: str) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), db_url, *args],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def query(pool: Pool, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    async with pool.connection() as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall()


async def wait_until(check: Any, within: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not met within {within}s")
        await asyncio.sleep(0.05)


async def wait_exit(proc: subprocess.Popen[bytes], within: float) -> int:
    deadline = time.monotonic() + within
    while proc.poll() is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"worker {proc.pid} still running after {within}s")
        await asyncio.sleep(0.05)
    return proc.returncode


@pytest.mark.slow
async def test_sigkill_mid_job_is_reaped_and_retried_with_one_effect(
    store: Store, pool: Pool, spawn: Any
) -> None:
    backoff = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=100))
    job = await store.enqueue(
        NewJob(type="slow", payload={"sleep": 60, "sleep_retry": 0}, backoff=backoff)
    )
    first = spawn("--lease", "1.5", "--heartbeat", "0.3", "--reap", "0.2")

    async def started() -> bool:
        return bool(await query(pool, "SELECT 1 FROM starts WHERE job_id = %s", job.id))

    await wait_until(started, what="first attempt started")
    first.send_signal(signal.SIGKILL)
    await wait_exit(first, 5)
    assert (await store.get(job.id)).state is JobState.LEASED

    spawn("--lease", "1.5", "--heartbeat", "0.3", "--reap", "0.2")

    async def succeeded() -> bool:
        return (await store.get(job.id)).state is JobState.SUCCEEDED

    await wait_until(succeeded, what="job retried after the crash")
    done = await store.get(job.id)
    assert done.attempts == 2  # the crashed attempt counts
    assert await query(pool, "SELECT n FROM counters WHERE job_id = %s", job.id) == [(1,)]
    assert await query(pool, "SELECT attempt FROM starts ORDER BY attempt") == [(1,), (2,)]
    kinds = [e.kind for e in await store.events(job.id)]
    assert kinds == ["enqueued", "claimed", "reaped", "claimed", "succeeded"]


@pytest.mark.slow
async def test_four_workers_run_20000_jobs_each_effect_exactly_once(
    store: Store, pool: Pool, spawn: Any
) -> None:
    total = 20_000
    for _ in range(0, total, 5000):
        await store.enqueue_batch([NewJob(type="count") for _ in range(5000)])
    workers = [spawn("--concurrency", "50") for _ in range(4)]

    async def drained() -> bool:
        rows = await query(pool, "SELECT count(*) FROM jobs WHERE state = 'succeeded'")
        return bool(rows[0][0] == total)

    await wait_until(drained, within=120, what="all jobs succeeded")
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    for proc in workers:
        assert await wait_exit(proc, 20) == 0
    states = await query(pool, "SELECT state::text, count(*) FROM jobs GROUP BY 1")
    assert states == [("succeeded", total)]
    counters = await query(pool, "SELECT count(*), min(n), max(n) FROM counters")
    assert counters == [(total, 1, 1)]
    attempts = await query(pool, "SELECT max(attempts) FROM jobs")
    assert attempts == [(1,)]


@pytest.mark.slow
async def test_sigterm_finishes_short_jobs_and_hands_back_long_ones(
    store: Store, pool: Pool, spawn: Any
) -> None:
    short = [await store.enqueue(NewJob(type="slow", payload={"sleep": 0.5})) for _ in range(3)]
    long = [await store.enqueue(NewJob(type="slow", payload={"sleep": 60})) for _ in range(3)]
    proc = spawn("--grace", "1.5", "--lease", "30", "--heartbeat", "5")

    async def all_started() -> bool:
        return bool((await query(pool, "SELECT count(*) FROM starts"))[0][0] == 6)

    await wait_until(all_started, what="all six jobs started")
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert await wait_exit(proc, 10) == 0
    assert time.monotonic() - began < 5
    for job in short:
        assert (await store.get(job.id)).state is JobState.SUCCEEDED
    for job in long:
        back = await store.get(job.id)
        assert back.state is JobState.QUEUED, back.state
        assert back.lease_owner is None
        assert back.last_error is not None
        assert "handed back" in back.last_error
    assert await query(pool, "SELECT count(*) FROM jobs WHERE state = 'leased'") == [(0,)]
    assert await query(pool, "SELECT count(*) FROM counters") == [(3,)]


@pytest.mark.slow
async def test_a_second_sigterm_hands_back_at_once(store: Store, pool: Pool, spawn: Any) -> None:
    job = await store.enqueue(NewJob(type="slow", payload={"sleep": 60}))
    proc = spawn("--grace", "60")

    async def started() -> bool:
        return bool(await query(pool, "SELECT 1 FROM starts"))

    await wait_until(started, what="job started")
    proc.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)
    assert proc.poll() is None  # still inside its grace period
    proc.send_signal(signal.SIGTERM)
    assert await wait_exit(proc, 10) == 0
    back = await store.get(job.id)
    assert back.state is JobState.QUEUED
    assert back.lease_owner is None
