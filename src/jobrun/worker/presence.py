"""Presence: the worker's row among the live workers, kept while it runs.

The worker writes its row when it starts and again every heartbeat interval,
with the jobs it runs and since when; it deletes the row when it stops. The
Workers page of the dashboard and ``jobrun workers`` read these rows. A row
that stops being written (the process died, or cannot reach the database)
is shown as gone after three intervals and deleted by maintenance later: no
worker has to say it died.

A failed write is logged and tried again at the next interval; nothing
else in the worker waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from jobrun._version import version as jobrun_version
from jobrun.domain import RunningJob, WorkerReport
from jobrun.outages import process_outages
from jobrun.ports import Presence as PresencePort
from jobrun.worker.attempt import one_line
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.state import WorkerState

__all__ = ["Presence"]


class Presence:
    """Writes ``owner``'s row every ``settings.heartbeat_every`` while :meth:`run` runs."""

    def __init__(
        self,
        store: PresencePort,
        state: WorkerState,
        settings: WorkerSettings,
        *,
        owner: str,
        log: logging.Logger,
    ) -> None:
        self._store = store
        self._state = state
        self._owner = owner
        self._every = settings.heartbeat_every
        self._log = log
        self._base = WorkerReport(
            owner=owner,
            host=socket.gethostname(),
            pid=os.getpid(),
            version=jobrun_version(),
            queues=tuple(settings.queues),
            concurrency=settings.concurrency,
            beat=settings.heartbeat_every,
            started_at=datetime.now(UTC),
        )

    def report(self) -> WorkerReport:
        """What the row says now: who this worker is and the jobs it runs."""
        wall, mono = datetime.now(UTC), time.monotonic()
        running = tuple(
            RunningJob(
                id=run.job.id,
                type=run.job.type,
                queue=run.job.queue,
                started_at=wall - timedelta(seconds=mono - run.started),
            )
            for run in self._state.running.values()
            if not run.left
        )
        return replace(self._base, running=running)

    async def run(self) -> None:
        """Write the row now and every interval until cancelled."""
        every = self._every.total_seconds()
        while True:
            try:
                await self._store.worker_seen(self.report())
            except Exception as exc:
                process_outages().log_failure(
                    self._log, exc, "could not write this worker's row: %s", one_line(exc)
                )
            await asyncio.sleep(every)

    async def close(self) -> None:
        """Delete the row: the worker stopped (a failure only leaves it to age out)."""
        with contextlib.suppress(Exception):
            await self._store.worker_gone(self._owner)
