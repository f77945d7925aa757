"""A worker process for the process-level tests: real signals, real crashes.

Run as ``python worker_proc.py URL [options]``. It serves two job types whose
effects land in tables the test creates:

- ``count``: the commit callback upserts ``counters(job_id, n)`` adding 1, so
  ``n = 1`` for every job proves each effect committed exactly once.
- ``slow``: records the attempt in ``starts`` (outside the job's transaction,
  so the test can see it began), sleeps ``payload["sleep"]`` seconds on the
  first attempt (``payload["sleep_retry"]`` on later ones), then counts like
  ``count``.

SIGTERM/SIGINT go through ``Worker.install_signal_handlers``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from jobrun.config import Config
from jobrun.postgres import open_pool
from jobrun.postgres.notify import Notifier
from jobrun.postgres.store import Store
from jobrun.registry import JobContext, Registry
from jobrun.worker import Worker

Commit = Callable[[Any], Awaitable[None]]


def counting(job_id: Any) -> Commit:
    async def commit(conn: Any) -> None:
        await conn.execute(
            "INSERT INTO counters (job_id, n) VALUES (%s, 1) "
            "ON CONFLICT (job_id) DO UPDATE SET n = counters.n + 1",
            (job_id,),
        )

    return commit


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--heartbeat", type=float, default=5.0)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--reap", type=float, default=0.5)
    parser.add_argument("--poll", type=float, default=0.2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(process)d %(levelname)s %(message)s")

    pool = await open_pool(args.url, worker_concurrency=args.concurrency)
    store = Store(pool)
    registry = Registry()

    @registry.handler("count")
    async def count(ctx: JobContext, payload: Any) -> Commit:
        return counting(ctx.job.id)

    @registry.handler("slow")
    async def slow(ctx: JobContext, payload: dict[str, Any]) -> Commit:
        async with pool.connection() as conn:
            await conn.execute(
                "INSERT INTO starts (job_id, attempt) VALUES (%s, %s)", (ctx.job.id, ctx.attempt)
            )
        delay = payload.get("sleep", 0) if ctx.attempt == 1 else payload.get("sleep_retry", 0)
        await asyncio.sleep(delay)
        return counting(ctx.job.id)

    async with Notifier(args.url) as notifier:
        config = Config(
            concurrency=args.concurrency,
            lease=timedelta(seconds=args.lease),
            heartbeat_every=timedelta(seconds=args.heartbeat),
            shutdown_grace=timedelta(seconds=args.grace),
            reap_every=timedelta(seconds=args.reap),
            poll=timedelta(seconds=args.poll),
        )
        worker = Worker(store, registry, config, dispatcher=notifier)
        worker.install_signal_handlers()
        await worker.run()
    await pool.close()


if __name__ == "__main__":
    asyncio.run(main())
