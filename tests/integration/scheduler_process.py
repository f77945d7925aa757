"""A scheduler in its own process, for the kill -9 failover test.

Usage: python scheduler_process.py DB_URL LOCK_KEY RETRY TICK PROBE

Prints ``LEADER <pid>`` / ``FOLLOWER <pid>`` on stdout whenever its role
changes (and ``READY <pid>`` once running), and ``TRIED <n>`` whenever the
count of its answered tries for the lock changes, flushed, so the test can
follow leadership from outside.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from jobrun.postgres import open_pool
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.store import Store
from jobrun.scheduler import Scheduler


def say(word: str) -> None:
    print(f"{word} {os.getpid()}", flush=True)


async def main(url: str, key: int, retry: float, tick: float, probe: float) -> None:
    pool = await open_pool(url, worker_concurrency=1)
    scheduler = Scheduler(
        Store(pool),
        AdvisoryLocker(
            url,
            application_name=f"jobrun-sched-{os.getpid()}",
            probe_every=timedelta(seconds=probe),
        ),
        key=key,
        tick=timedelta(seconds=tick),
        retry_leadership_every=timedelta(seconds=retry),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(scheduler.run(stop))
    say("READY")
    leading = False
    tried = 0
    try:
        # The reporter looks every 10 ms: this process's own pace, not a test's wait.
        while not task.done():
            if scheduler.leadership_attempts != tried:
                tried = scheduler.leadership_attempts
                print(f"TRIED {tried}", flush=True)
            if scheduler.is_leader != leading:
                leading = scheduler.is_leader
                say("LEADER" if leading else "FOLLOWER")
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await task
        await pool.close()


if __name__ == "__main__":
    db_url, lock_key, retry_s, tick_s, probe_s = sys.argv[1:6]
    asyncio.run(main(db_url, int(lock_key), float(retry_s), float(tick_s), float(probe_s)))
