"""The shutdown: let running jobs finish until the grace deadline, then hand the rest back.

Jobs claimed ahead and never started are handed back first. Running jobs
then get ``shutdown_grace`` (none after a second stop request); whatever still
runs is stopped (:data:`~jobrun.worker.attempt.STOP_SHUTDOWN`) and handed back
(queued, due now, the attempt not counted), so it neither sits leased until
its lease expires nor loses an attempt to a deploy.

A job is handed back only once its handler has stopped. An async handler is
cancelled and stops; a sync handler runs in a thread that cannot be stopped,
so one that ignores its cancellation token past the deadline is *left*: its
job stays leased, the worker returns without waiting for the thread (the
threads are daemon threads, so the process can exit), and the lease runs out
so the reaper decides, counting the attempt. Handing such a job back would
let another worker start it while this thread still runs it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from jobrun._endings import plural
from jobrun.domain import Job
from jobrun.durations import format_duration
from jobrun.worker.attempt import STOP_SHUTDOWN, Attempt
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.signals import Signal
from jobrun.worker.state import WorkerState

__all__ = ["HAND_BACK_TIMEOUT", "Shutdown"]

HAND_BACK_TIMEOUT = 10.0
"""How long a shutdown waits for handed-back jobs to be reported before giving up on
them (their leases then expire and the reaper requeues them)."""
# At the shutdown deadline, how long a sync handler gets to notice its
# cancellation token before its job is left leased for the reaper.
_TOKEN_NOTICE = 0.5


class Shutdown:
    """Drains ``state``'s jobs within ``settings.shutdown_grace`` when its worker stops.

    ``give_back`` hands the buffered ones back; ``draining`` (a test signal) is told when
    the grace period begins.
    """

    def __init__(
        self,
        state: WorkerState,
        settings: WorkerSettings,
        *,
        owner: str,
        give_back: Callable[[Job, str], None],
        log: logging.Logger,
        draining: Signal[int] | None = None,
    ) -> None:
        self._state = state
        self._draining = draining
        self._grace = settings.shutdown_grace.total_seconds()
        self._lease = settings.lease
        self._owner = owner
        self._give_back = give_back
        self._log = log

    async def drain(self) -> None:
        """Let running jobs finish until the grace deadline, then hand the rest back."""
        state = self._state
        for job in state.take_ahead():
            self._give_back(job, "handed back: the worker shut down before the job started")
        if self._draining is not None:
            self._draining.emit(len(state.running))
        await self._grace_period()
        if not state.running:
            return
        self._log.warning(
            "handing back %s",
            plural(len(state.running), "unfinished job"),
            extra={"owner": self._owner},
        )
        state.handing_back = True
        for run in list(state.running.values()):
            run.stop(STOP_SHUTDOWN)
        left = await self._leave_stuck_threads()
        # A run that ends may start its successor, handed back at once: wait for those too.
        give_up = time.monotonic() + HAND_BACK_TIMEOUT
        while True:
            tasks = {r.task for r in state.running.values() if r.task is not None and not r.left}
            remaining = give_up - time.monotonic()
            if not tasks or remaining <= 0:
                break
            await asyncio.wait(tasks, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if tasks:
            for task in tasks:
                task.cancel()
            self._log.error(
                "%s could not be handed back in time; their leases will expire",
                plural(len(tasks), "job"),
            )
        for run in left:
            # Stop waiting for the thread; the executor sees ``left`` and reports nothing.
            if run.task is not None:
                run.task.cancel()

    async def _grace_period(self) -> None:
        """Wait for running jobs until they are done, the deadline passes or a hard stop."""
        state = self._state
        deadline = time.monotonic() + self._grace
        hard = asyncio.ensure_future(state.hard.wait())
        try:
            while state.running and not state.hard.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                tasks = {r.task for r in state.running.values() if r.task is not None}
                await asyncio.wait(
                    tasks | {hard}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            hard.cancel()

    async def _leave_stuck_threads(self) -> list[Attempt]:
        """Give sync handlers a moment to notice their token; leave those that still run."""
        state = self._state
        # A thread that still runs after it cannot be stopped, so its job must not be handed back.
        threads = {
            r.task for r in state.running.values() if r.task is not None and r.thread is not None
        }
        if threads:
            await asyncio.wait(threads, timeout=_TOKEN_NOTICE)
        left = [r for r in state.running.values() if r.thread_running]
        for run in left:
            run.left = True
        if left:
            self._log.warning(
                "leaving %s leased whose handler threads are still running: %s; "
                "their leases expire within %s and the reaper then retries them",
                plural(len(left), "job"),
                ", ".join(str(r.job.id) for r in left),
                format_duration(self._lease),
                extra={"owner": self._owner, "job_ids": [str(r.job.id) for r in left]},
            )
        return left
