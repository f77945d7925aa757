"""The reaper: puts jobs whose lease expired back in their queue (or kills them).

A worker that dies mid-job leaves its jobs leased; nobody will complete them,
so once their lease runs out they must be requeued with their own backoff, or
marked ``dead`` when that was their last attempt. The store does the
transition under ``FOR UPDATE SKIP LOCKED``, which makes the reaper safe to run
in every worker at once: two reapers never touch the same row. Every
:class:`~jobrun.worker.Worker` runs one; it can also run on its own.

Time is the database's: the store compares leases with database now (the clock rule).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from jobrun.domain import Job
from jobrun.durations import format_duration
from jobrun.errors import ConfigurationError, JobrunError
from jobrun.outages import process_outages
from jobrun.ports import Reaping
from jobrun.telemetry.hooks import Observer

__all__ = ["Reaper"]

_log = logging.getLogger("jobrun.reaper")


class Reaper:
    """Calls ``store.reap_expired`` every ``every``, draining a backlog in batches of ``limit``."""

    def __init__(
        self,
        store: Reaping,
        every: timedelta = timedelta(seconds=5),
        *,
        limit: int = 1000,
        logger: logging.Logger | None = None,
        observer: Observer | None = None,
    ) -> None:
        if every <= timedelta(0):
            raise ConfigurationError(
                f"reap interval must be positive, not {format_duration(every)}"
            )
        if limit < 1:
            raise ConfigurationError(f"reap limit must be at least 1, not {limit}")
        self._store = store
        self._every = every.total_seconds()
        self._limit = limit
        self._log = logger or _log
        self._observer = observer

    async def reap_once(self) -> list[Job]:
        """Reap every lease expired by database now; return the jobs it requeued or killed."""
        reaped: list[Job] = []
        while True:
            batch = await self._store.reap_expired(self._limit)
            reaped.extend(batch)
            if batch and self._observer is not None:
                self._observer.reaped(batch)
            for job in batch:
                self._log.warning(
                    "lease expired: job %s is now %s",
                    job.id,
                    job.state.value,
                    extra={
                        "job_id": str(job.id),
                        "job_type": job.type,
                        "attempt": job.attempts,
                        "outcome": "reaped",
                        "state": job.state.value,
                    },
                )
            # A full batch means more may be waiting; anything less drained it.
            if len(batch) < self._limit:
                return reaped

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Reap until ``stop`` is set (or forever, until cancelled).

        A failing pass is logged and retried on the next tick: an unreachable
        database must not kill the worker that hosts the reaper.
        """
        stop = stop or asyncio.Event()
        health = process_outages().part(self._log, "reaper working again")
        while not stop.is_set():
            try:
                await self.reap_once()
            except Exception as exc:
                # One line per pass, none during a database outage (the process
                # says it once); debug logging adds the tracebacks.
                reason = " ".join(str(exc).split())
                if not isinstance(exc, JobrunError):
                    reason = f"{type(exc).__name__}: {reason}"
                health.failed(exc, "reaper pass failed, retrying in %.1fs: %s", self._every, reason)
            else:
                health.ok()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._every)
