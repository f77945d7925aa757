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
from jobrun.testing import eventually

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
    found = await eventually(lambda: leaders(group), within=within, what="a leader")
    return found[0]


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


async def gone(db_url: str, app_name: str) -> bool:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            (app_name,),
        )
        return await cur.fetchone() == (0,)


async def jobs_per_key(db_url: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT idempotency_key, count(*) FROM jobs"
            " WHERE idempotency_key LIKE 'sched:%%' GROUP BY idempotency_key"
        )
        return {str(k): int(c) for k, c in await cur.fetchall()}


async def len_at_least(db_url: str, n: int) -> bool:
    return len(await jobs_per_key(db_url)) >= n


def key() -> int:
    return uuid.uuid4().int >> 65  # a fresh lock key per test: no cross-test contention


async def test_only_one_of_two_schedulers_leads(db_url: str, pool: Pool) -> None:
    async with running_schedulers(db_url, pool, 2, key()) as group:
        leader = await wait_for_leader(group, 5)
        follower = next(r for r in group if r is not leader)
        tried = follower.scheduler.leadership_attempts

        async def follower_retried_thrice_under_one_leader() -> bool:
            assert len(await leaders(group)) == 1
            return follower.scheduler.leadership_attempts >= tried + 3

        # The follower tried for the lock three more times, refused each time.
        await eventually(follower_retried_thrice_under_one_leader)
        assert await leaders(group) == [leader]


async def test_killing_leader_lock_connection_hands_over_within_bound(
    db_url: str, pool: Pool
) -> None:
    async with running_schedulers(db_url, pool, 2, key()) as group:
        leader = await wait_for_leader(group, 5)
        follower = next(r for r in group if r is not leader)
        assert await terminate(db_url, leader.app_name) == 1
        # The backend is gone, so the server has freed the lock.
        await eventually(lambda: gone(db_url, leader.app_name), what="the backend gone")
        tried = follower.scheduler.leadership_attempts
        # The bound is one retry period: the follower leads at its next try
        # (or the one after, if a try was already on its way when the lock
        # was freed), counted in tries rather than measured on a clock.
        await eventually(lambda: follower.scheduler.is_leader, what="the follower leading")
        assert follower.scheduler.leadership_attempts <= tried + 2
        # The old leader noticed and stepped down: never two leaders.
        await eventually(
            lambda: not leader.scheduler.is_leader, what="the old leader stepping down"
        )
        assert follower.scheduler.is_leader


async def test_leader_materialises_interval_schedule(db_url: str, pool: Pool) -> None:
    store = Store(pool)
    await store.create_schedule(NewSchedule(name="tick", type="ping", every=timedelta(seconds=1)))
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with running_schedulers(db_url, pool, 2, key()):
        await eventually(lambda: len_at_least(db_url, 3), what="three runs")
    took = loop.time() - started
    counts = await jobs_per_key(db_url)
    # One run at once, then at most one a second: never a burst of extra runs.
    assert 3 <= len(counts) <= int(took) + 2
    assert set(counts.values()) == {1}


async def test_two_schedulers_never_materialise_a_run_twice(db_url: str, pool: Pool) -> None:
    store = Store(pool)
    for i in range(3):
        await store.create_schedule(
            NewSchedule(name=f"every-{i}", type="ping", every=timedelta(seconds=1))
        )
    async with running_schedulers(db_url, pool, 2, key()) as group:
        # Force leadership changes while runs are due: each leader materialises
        # some runs, then loses its lock.
        for _ in range(3):
            leader = await wait_for_leader(group, 5)
            made = leader.scheduler.materialised
            await eventually(lambda: leader.scheduler.materialised > made, what="a run")  # noqa: B023 - awaited here
            await terminate(db_url, leader.app_name)
            await eventually(lambda: not leader.scheduler.is_leader)  # noqa: B023 - awaited here
        await wait_for_leader(group, 5)
        await eventually(lambda: len_at_least(db_url, 6), what="six runs")
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
    done = asyncio.Event()

    async def hammer(s: Any) -> None:
        while not done.is_set():
            await s.due_schedules(await s.now())

    hammers = [asyncio.create_task(hammer(s)) for s in stores]
    # Hammer until a second run has come due and been materialised.
    await eventually(lambda: len_at_least(db_url, 2), what="two runs")
    done.set()
    await asyncio.gather(*hammers)
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
