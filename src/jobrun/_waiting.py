"""One wait shared by the leader-elected services (scheduler, maintenance, queue gauges).

Each of them sleeps between ticks but must wake at once when it is asked to
stop or when its advisory lock is lost, so a former leader never acts on a
lease it no longer has.
"""

from __future__ import annotations

import asyncio
import contextlib

from jobrun.ports import LockHandle

__all__ = ["sleep_unless"]


async def sleep_unless(
    stop: asyncio.Event | None, seconds: float, handle: LockHandle | None = None
) -> None:
    """Sleep ``seconds``, returning early when ``stop`` is set or ``handle`` is lost."""
    waits: list[asyncio.Task[object]] = []
    if stop is not None:
        waits.append(asyncio.create_task(stop.wait()))
    if handle is not None:
        waits.append(asyncio.create_task(handle.wait_lost()))
    if not waits:
        await asyncio.sleep(seconds)
        return
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
        for task in waits:
            with contextlib.suppress(asyncio.CancelledError):
                await task
