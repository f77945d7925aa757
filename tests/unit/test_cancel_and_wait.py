"""Ending a worker's services: a task that lets one cancellation pass still ends."""

from __future__ import annotations

import asyncio

from jobrun._waiting import cancel_and_wait


async def test_a_task_that_swallowed_a_cancellation_is_cancelled_again() -> None:
    # As Python 3.11's asyncio.wait_for does when the awaited result (a pooled
    # connection) arrives in the same turn as the cancellation: the task goes
    # on to its next wait as if it had not been cancelled.
    never = asyncio.Event()
    swallowed = asyncio.Event()
    started = [asyncio.Event(), asyncio.Event()]

    async def carries_on() -> None:
        started[0].set()
        try:
            await never.wait()
        except asyncio.CancelledError:
            swallowed.set()
        await never.wait()

    async def ends() -> None:
        started[1].set()
        await never.wait()

    stubborn = asyncio.create_task(carries_on())
    plain = asyncio.create_task(ends())
    for event in started:  # both are waiting
        await event.wait()
    # A bound far above again_every: without the second cancellation this never returns.
    await asyncio.wait_for(cancel_and_wait([stubborn, plain], again_every=0.05), 60)
    assert swallowed.is_set()
    assert stubborn.cancelled() and plain.cancelled()


async def test_exceptions_the_tasks_end_with_are_collected_not_raised() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    failed = asyncio.create_task(fails())
    await asyncio.wait([failed])  # it has ended with its exception
    await cancel_and_wait([failed])
    assert isinstance(failed.exception(), RuntimeError)
