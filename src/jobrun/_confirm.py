"""Confirm the jobs handed to a worker, so one it never received is not stuck for a lease.

A job an enqueue hands to an idle worker (see :class:`~jobrun.domain.HandoffOffer`)
is leased to it before the worker knows: if the worker's listening connection
dropped just then, the notification is lost and nobody runs the job until its
lease runs out. So a handed job starts with a short lease (``within``), and
the worker confirms each one it received with a heartbeat of it, which
extends the lease to the worker's own. A job not confirmed in time is given
back by the reaper, due at once and its attempt not counted.

Invariants:

* A job is confirmed a third of ``within`` after it arrived, as a heartbeat
  sits well inside its lease; one that has left the worker by then (most
  handed jobs finish sooner) costs no statement at all.
* The confirmation is the heartbeat, under its fence: a job whose short lease
  already ran out, or that another worker holds now, is not kept, and the
  worker stops its run (whose report then meets ``LeaseLost``), so the job
  is not worked twice while another worker holds it.
* A confirmation that fails (a database error) is tried again while the
  short lease lasts; after that it is the reaper's.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from jobrun.domain import Job
from jobrun.outages import process_outages
from jobrun.ports import Executor

__all__ = ["HandoffConfirmer"]


class HandoffConfirmer:
    """Confirms the handed jobs ``held`` still says the worker holds, ``within`` their short lease.

    ``lease`` is the worker's own lease, which a confirmation extends the job
    to; ``lost`` is told of every job the confirmation did not keep.
    """

    def __init__(
        self,
        store: Executor,
        owner: str,
        *,
        lease: timedelta,
        within: timedelta,
        held: Callable[[Job], bool],
        lost: Callable[[Job], None],
        logger: logging.Logger,
    ) -> None:
        self._store = store
        self._owner = owner
        self._lease = lease
        self.within = within
        """How long a handed job's first lease lasts: the time the worker has to confirm it."""
        self._seconds = within.total_seconds()
        self._held = held
        self._lost = lost
        self._log = logger
        # A heap of (when to confirm, arrival number, when the short lease
        # runs out, the job): the number keeps jobs from being compared.
        self._pending: list[tuple[float, int, float, Job]] = []
        self._count = itertools.count()
        self._sooner = asyncio.Event()

    def add(self, job: Job) -> None:
        """A handed job started here: confirm it unless it is gone by then."""
        now = time.monotonic()
        self._push(now + self._seconds / 3, now + self._seconds, job)

    def _push(self, due: float, ends: float, job: Job) -> None:
        if not self._pending or due < self._pending[0][0]:
            self._sooner.set()  # run() sleeps until the earliest; this one is earlier
        heapq.heappush(self._pending, (due, next(self._count), ends, job))

    async def run(self) -> None:
        """Confirm jobs as they come due; runs until cancelled."""
        while True:
            self._sooner.clear()
            if not self._pending:
                await self._sooner.wait()
                continue
            delay = self._pending[0][0] - time.monotonic()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._sooner.wait()
                continue
            await self._confirm_due()

    async def _confirm_due(self) -> None:
        now = time.monotonic()
        held: list[tuple[float, Job]] = []
        while self._pending and self._pending[0][0] <= now:
            _, _, ends, job = heapq.heappop(self._pending)
            if self._held(job):
                held.append((ends, job))
        if not held:
            return
        jobs = [job for _, job in held]
        try:
            kept = await self._store.heartbeat(self._owner, jobs, self._lease)
        except Exception as exc:
            # Again soon, while the short leases last; a heartbeat of the
            # worker's own, or the reaper, settles the rest.
            retry = time.monotonic() + self._seconds / 6
            for ends, job in held:
                if retry < ends:
                    self._push(retry, ends, job)
            process_outages().log_failure(
                self._log, exc, "could not confirm %d handed jobs: %s", len(jobs), exc
            )
            return
        for job in jobs:
            if job.id not in kept:
                self._lost(job)
