"""Under a sustained workload with maintenance on, the jobs table stays small.

A producer enqueues at a fixed rate while a Client worker runs them, with
succeeded jobs kept ``RETENTION`` and the maintenance leader pruning every
``EVERY``. A succeeded job is then gone within about RETENTION + EVERY (plus
a pass and a little lag) of finishing, so the table never holds much more
than RATE x that window of jobs. The test samples ``count(*)`` throughout and
asserts it never exceeds ``BOUND``: RATE x (RETENTION + EVERY + SLACK), with
SLACK generous for a loaded machine. The negative control runs the same
workload with maintenance off and shows the count growing past that bound,
so the bound is one the test can fail.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from jobrun import Client, JobContext, NewJob, Registry

pytestmark = pytest.mark.slow

RATE = 50
"""Jobs per second the producer enqueues (at most: it never catches up)."""
BATCH = 10
"""Jobs per enqueue; one batch every BATCH / RATE seconds."""
DURATION = 20.0
"""Seconds the producer runs."""
RETENTION = 2.0
"""Seconds succeeded jobs are kept."""
EVERY = 1.0
"""Seconds between two pruning passes."""
SLACK = 5.0
"""Seconds of lag tolerated on top: claim and completion lag, the pass itself, a busy machine."""
BOUND = int(RATE * (RETENTION + EVERY + SLACK))
"""The most jobs the table may hold at any sample with maintenance on (400)."""
PRODUCED = int(RATE * DURATION)
"""Jobs the producer enqueues in all (1000): well past BOUND, or the test proves nothing."""


async def job_count(conn: psycopg.AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT count(*) FROM jobs")
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("maintenance", [True, False], ids=["maintenance", "no-maintenance"])
async def test_the_jobs_table_stays_bounded_under_load_with_maintenance_on(
    db_url: str, maintenance: bool
) -> None:
    assert PRODUCED > 2 * BOUND
    registry = Registry()

    @registry.handler("work")
    async def work(ctx: JobContext, payload: Any) -> None:
        return None

    client = Client(
        registry,
        database_url=db_url,
        concurrency=10,
        poll=timedelta(milliseconds=200),
        maintenance=maintenance,
        maintenance_every=timedelta(seconds=EVERY),
        retention_succeeded=timedelta(seconds=RETENTION),
    )
    stop = asyncio.Event()
    samples: list[int] = []
    produced = 0
    async with client:
        worker = asyncio.create_task(client.run_worker(stop=stop))

        async def produce() -> None:
            nonlocal produced
            for _ in range(PRODUCED // BATCH):
                await client.enqueue_batch([NewJob(type="work") for _ in range(BATCH)])
                produced += BATCH
                # The producer's pace: the load the test applies, not a wait.
                await asyncio.sleep(BATCH / RATE)

        async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
            producer = asyncio.create_task(produce())
            while not producer.done():
                samples.append(await job_count(conn))
                # The sampling cadence while the producer runs, not a wait.
                await asyncio.sleep(0.5)
            await producer
            samples.append(await job_count(conn))
            # Everything produced was run: nothing is left queued or leased.
            cur = await conn.execute(
                "SELECT count(*) FROM jobs WHERE state IN ('queued', 'leased')"
            )
            backlog_row = await cur.fetchone()
        stop.set()
        stats = await asyncio.wait_for(worker, 60)

    assert produced == PRODUCED
    assert stats.jobs >= PRODUCED - (backlog_row[0] if backlog_row else 0)
    peak = max(samples)
    if maintenance:
        assert peak <= BOUND, f"the jobs table reached {peak} rows (bound {BOUND}): {samples}"
    else:
        # The negative control: without pruning every job stays, far past the bound.
        assert samples[-1] == PRODUCED
        assert peak > BOUND
