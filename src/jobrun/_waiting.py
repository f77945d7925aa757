"""Waits the services share: a leader's sleep between ticks, and the end of cancelled tasks.

:func:`sleep_unless` is the sleep of the leader-elected services (scheduler,
maintenance, queue gauges): each must wake at once when it is asked to stop
or when its advisory lock is lost, so a former leader never acts on a lease
it no longer has. :func:`cancel_and_wait` is how a worker ends the services
beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from jobrun.ports import LockHandle

__all__ = ["cancel_and_wait", "sleep_unless"]


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


async def cancel_and_wait(tasks: Sequence[asyncio.Task[Any]], *, again_every: float = 1.0) -> None:
    """Cancel ``tasks`` and return once every one has ended, cancelling again any still running.

    One cancellation is not always enough on Python 3.11: ``asyncio.wait_for``
    returns the awaited result when a cancellation arrives in the same turn of
    the loop as that result (fixed in 3.12), and psycopg_pool waits for a free
    connection with it. A service cancelled just as the pool handed it a
    connection carried on with its loop, and a worker waiting once for it to
    end waited forever (a drain that never returned). So each task still
    running after ``again_every`` seconds is cancelled again. Exceptions the
    tasks ended with are collected, not raised.
    """
    for task in tasks:
        task.cancel()
    pending = {task for task in tasks if not task.done()}
    while pending:
        _, pending = await asyncio.wait(pending, timeout=again_every)
        for task in pending:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
