"""The runner: each job a worker starts, from its slot to its recorded outcome.

A started job becomes an :class:`~jobrun.worker.attempt.Attempt` running as
its own task: the executor runs the handler, the slot is freed the moment the
handler ends (reporting is database work that overlaps the next claim, which
keeps claims and completions pipelined), the reporter records the outcome,
and the attempt leaves the worker's state. Buffered jobs start as slots free.

A job claimed again while an attempt of it is still here is not started
twice: after an attempt that is only reporting it waits as its successor,
beside one that still runs it is refused (its lease expires, the reaper
decides).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from jobrun.domain import Job, Outcome
from jobrun.worker.attempt import STOP_SHUTDOWN, Attempt
from jobrun.worker.state import WorkerState

__all__ = ["Runner"]


class Runner:
    """Starts jobs into ``state`` and sees each through to its recorded outcome.

    ``attempt`` makes a job's attempt and ``execute`` runs it (the executor's,
    :class:`jobrun.worker.executor.JobExecutor`); ``report`` records its
    outcome (the reporter's).
    """

    def __init__(
        self,
        state: WorkerState,
        attempt: Callable[[Job], Attempt],
        execute: Callable[[Attempt], Awaitable[Outcome | None]],
        report: Callable[[Attempt, Outcome], Awaitable[None]],
        *,
        owner: str,
        log: logging.Logger,
    ) -> None:
        self._state = state
        self._attempt = attempt
        self._execute = execute
        self._report = report
        self._owner = owner
        self._log = log

    def start(self, job: Job, *, handed_back: bool = False) -> None:
        """Start ``job`` as its own task (with ``handed_back``, only to hand it back)."""
        state = self._state
        earlier = state.running.get(job.id.int)
        if earlier is not None:
            if earlier.reporting and earlier.successor is None:
                # The earlier run's outcome made the job due again and this
                # claim saw it before the run had been cleared away: the new
                # attempt starts as soon as it has.
                earlier.successor = job
                return
            # Claimed again while a stale attempt still runs here (its lease was
            # reaped): running both would run the job twice in this process. The
            # new lease is left to expire, and the reaper hands the job out again.
            self._log.warning(
                "job %s claimed again while its attempt %d still runs here; not starting it",
                job.id,
                earlier.job.attempts,
                extra={"job_id": str(job.id), "owner": self._owner},
            )
            return
        run = self._attempt(job)
        if handed_back:
            # Shutdown is handing jobs back: this one is returned without running.
            run.stop_reason = STOP_SHUTDOWN
        state.running[job.id.int] = run
        state.executing += 1
        state.starts += 1
        run.task = asyncio.get_running_loop().create_task(self._run(run))

    def start_ahead(self) -> None:
        """Start buffered jobs while slots are free (none once the worker is stopping)."""
        state = self._state
        while state.ahead and state.executing < state.concurrency:
            if state.stopping.is_set():
                return
            self.start(state.ahead.popleft()[0])

    async def _run(self, run: Attempt) -> None:
        """One attempt, as its own task: execute, free the slot, report, leave."""
        state = self._state
        try:
            outcome = await self._execute(run)
            self._release(run)
            if outcome is not None:
                await self._report(run, outcome)
        finally:
            self._release(run)
            state.running.pop(run.job.id.int, None)
            state.settled += 1
            if run.successor is not None:
                self.start(run.successor, handed_back=state.handing_back)
            state.wakeup.set()

    def _release(self, run: Attempt) -> None:
        """Free the job's handler slot: from here on it only reports its outcome."""
        if run.reporting:
            return
        run.reporting = True
        run.ran = time.monotonic() - run.started
        state = self._state
        state.executing -= 1
        if state.ahead:
            self.start_ahead()
        state.wakeup.set()
