"""Scheduler leader election and materialisation on a real server and the real Store."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from jobrun.domain import NewSchedule
from jobrun.postgres import Pool
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.scheduler import Scheduler

store_module = pytest.importorskip("jobrun.postgres.store")
Store = store_module.Store

RETRY = timedelta(milliseconds=500)
TICK = timedelta(milliseconds=200)
PROBE = timedelta(milliseconds=200)


@dataclass
class Running:
    scheduler: Scheduler
    app_name: str
    stop: asyncio.Event
    task: asyncio.Task[None]


@contextlib.asynccontextmanager
async def running_schedulers(
    db_url: str, pool: Pool, n: int, key: int
) -> AsyncIterator[list[Running]]:
    out: list[Running] = []
    for _ in range(n):
        name = f"jobrun-sched-{uuid.uuid4().hex[:8]}"
        scheduler = Scheduler(
            Store(pool),
            AdvisoryLocker(db_url, application_name=name, probe_every=PROBE),
            key=key,
            tick=TICK,
            retry_leadership_every=RETRY,
        )
        stop = asyncio.Event()
        out.append(Running(scheduler, name, stop, asyncio.create_task(scheduler.run(stop))))
    try:
        yield out
    finally:
        for r in out:
            r.stop.set()
        await asyncio.wait_for(asyncio.gather(*(r.task for r in out)), 10)


async def leaders(group: list[Running]) -> list[Running]:
    return [r for r in group if r.scheduler.is_leader]


async def wait_for_leader(group: list[Running], within: float) -> Running:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        found = await leaders(group)
        if found:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no leader within {within}s")


async def terminate(db_url: str, app_name: str) -> int:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            (app_name,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def jobs_per_key(db_url: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT idempotency_key, count(*) FROM jobs"
            " WHERE idempotency_key LIKE 'sched:%%' GROUP BY idempotency_key"
        )
        return {str(k): int(c) for k, c in await cur.fetchall()}


def key() -> int:
    return uuid.uuid4().int >> 65  # a fresh lock key per test: no cross-test contention


async def test_only_one_of_two_schedulers_leads(db_url: str, pool: Pool) -> None:
    async with running_schedulers(db_url, pool, 2, key()) as group:
        await wait_for_leader(group, 5)
        for _ in range(30):
            assert len(await leaders(group)) == 1
            await asyncio.sleep(0.05)


async def test_killing_leader_lock_connection_hands_over_within_bound(
    db_url: str, pool: Pool
) -> None:
    async with running_schedulers(db_url, pool, 2, key()) as group:
        leader = await wait_for_leader(group, 5)
        follower = next(r for r in group if r is not leader)
        loop = asyncio.get_running_loop()
        assert await terminate(db_url, leader.app_name) == 1
        killed_at = loop.time()
        bound = follower.scheduler.failover_bound + 0.5  # one retry period + connect slack
        while not follower.scheduler.is_leader:
            assert loop.time() - killed_at < bound, "follower did not take over in time"
            await asyncio.sleep(0.01)
        # The old leader noticed and stepped down: never two leaders.
        await asyncio.sleep(2 * PROBE.total_seconds())
        assert not leader.scheduler.is_leader
        assert follower.scheduler.is_leader


async def test_leader_materialises_interval_schedule(db_url: str, pool: Pool) -> None:
    store = Store(pool)
    await store.create_schedule(NewSchedule(name="tick", type="ping", every=timedelta(seconds=1)))
    async with running_schedulers(db_url, pool, 2, key()):
        await asyncio.sleep(3.5)
    counts = await jobs_per_key(db_url)
    assert 2 <= len(counts) <= 5
    assert set(counts.values()) == {1}


async def test_two_schedulers_never_materialise_a_run_twice(db_url: str, pool: Pool) -> None:
    store = Store(pool)
    for i in range(3):
        await store.create_schedule(
            NewSchedule(name=f"every-{i}", type="ping", every=timedelta(seconds=1))
        )
    async with running_schedulers(db_url, pool, 2, key()) as group:
        # Force leadership changes while runs are due.
        for _ in range(3):
            leader = await wait_for_leader(group, 5)
            await asyncio.sleep(1.0)
            await terminate(db_url, leader.app_name)
        await wait_for_leader(group, 5)
        await asyncio.sleep(1.0)
    counts = await jobs_per_key(db_url)
    assert len(counts) >= 6
    duplicated = {k: c for k, c in counts.items() if c != 1}
    assert duplicated == {}


async def test_overlapping_leaders_make_one_job_per_run(db_url: str, pool: Pool) -> None:
    # Two leaders can overlap for up to one probe interval; hammer due_schedules
    # from several stores at once to show the store's guard holds.
    stores = [Store(pool) for _ in range(4)]
    await stores[0].create_schedule(
        NewSchedule(name="hot", type="ping", every=timedelta(seconds=1))
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3.0

    async def hammer(s: Any) -> None:
        while loop.time() < deadline:
            await s.due_schedules(await s.now())

    await asyncio.gather(*(hammer(s) for s in stores))
    counts = await jobs_per_key(db_url)
    assert len(counts) >= 2
    assert set(counts.values()) == {1}


async def test_stop_releases_leadership(db_url: str, pool: Pool) -> None:
    k = key()
    async with running_schedulers(db_url, pool, 1, k) as group:
        await wait_for_leader(group, 5)
    # Stopped: the lock is free for someone else at once.
    handle = await AdvisoryLocker(db_url).try_acquire(k)
    assert handle is not None
    await handle.release()
