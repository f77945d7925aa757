"""The heartbeat: extends the leases of every job a worker holds, every ``heartbeat_every``.

A job left out of the kept set was cancelled or lost its lease. A running
one is stopped (:meth:`~jobrun.worker.attempt.Attempt.stop`: task
cancellation for async handlers, the :class:`~jobrun.registry.CancellationToken`
for sync ones) and its attempt reported as a failure, which the store turns
into ``cancelled`` when a cancel was requested. A buffered one (claimed
ahead, not started) is reported the same way without running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from uuid import UUID

from jobrun.domain import Job, Outcome, OutcomeKind
from jobrun.outages import process_outages
from jobrun.ports import Executor
from jobrun.worker.attempt import STOP_CANCELLED, Attempt, log_fields, one_line
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.state import WorkerState

__all__ = ["Heartbeat"]


class Heartbeat:
    """Extends the leases ``state`` lists for ``owner`` every ``settings.heartbeat_every``.

    Each round also carries the progress the running handlers reported since
    the last one (:meth:`jobrun.registry.JobContext.progress`).

    ``submit`` reports the buffered jobs it drops.
    """

    def __init__(
        self,
        store: Executor,
        state: WorkerState,
        settings: WorkerSettings,
        *,
        owner: str,
        submit: Callable[[Outcome], object],
        log: logging.Logger,
    ) -> None:
        self._store = store
        self._state = state
        self._owner = owner
        self._lease = settings.lease
        self._every = settings.heartbeat_every.total_seconds()
        self._submit = submit
        self._log = log

    async def run(self) -> None:
        """Beat until cancelled; a failed round is logged once and retried next time."""
        health = process_outages().part(self._log, "heartbeats working again")
        state = self._state
        while True:
            await asyncio.sleep(self._every)
            runs = [run for run in state.running.values() if not run.left]
            held = [run.job for run in runs]
            held += [run.successor for run in state.running.values() if run.successor]
            buffered = [job for job, _ in state.ahead]
            held += buffered
            if not held:
                continue
            # The latest progress of each job whose handler reported since the
            # last round (JobContext.progress): one write per round, not per call.
            reports = [
                (run, run.ctx.reported)
                for run in runs
                if run.ctx.reported is not None and run.ctx.reported is not run.progress_sent
            ]
            progress = [(run.job, *report) for run, report in reports if report is not None]
            try:
                kept = await self._store.heartbeat(
                    self._owner, held, self._lease, progress=progress
                )
            except Exception as exc:
                health.failed(
                    exc, "heartbeat failed, leases not extended this round: %s", one_line(exc)
                )
                continue
            health.ok()
            for run, report in reports:
                run.progress_sent = report
            self._drop(runs, buffered, kept)

    def _drop(self, runs: list[Attempt], buffered: list[Job], kept: set[UUID]) -> None:
        """Stop or report what the heartbeat sent and was not kept."""
        state = self._state
        # What the heartbeat sent and was not kept is matched by identity,
        # not by id: a job whose attempt ended meanwhile (a snooze, a retry
        # due now) can be claimed again and held anew under the same id,
        # and that later claim was not what the heartbeat asked about.
        # Buffered when sent and not kept: cancelled (or the lease lost)
        # before it started. Reported as stopped, which ends it cancelled
        # or tells of the lost lease.
        sent = {id(job) for job in buffered}
        gone = [job for job, _ in state.ahead if id(job) in sent and job.id not in kept]
        if gone:
            state.drop_ahead(gone)
        for job in gone:
            self._submit(
                Outcome(
                    job=job,
                    kind=OutcomeKind.FAIL,
                    detail="stopped: the job was cancelled or its lease was lost",
                )
            )
        for run in runs:
            if run.job.id in kept or state.running.get(run.job.id.int) is not run:
                continue
            if not run.reporting and run.stop_reason is None:
                self._log.info(
                    "job %s was cancelled or lost its lease; stopping it",
                    run.job.id,
                    extra=log_fields(run, self._owner, outcome="stopping"),
                )
                run.stop(STOP_CANCELLED)
