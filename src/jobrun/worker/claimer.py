"""The claimer: the loop that leases due jobs for a worker's free slots.

Each claim leases as many due jobs as the worker has room for
(:func:`jobrun.worker.claiming.plan_claim`), in one statement, and starts
them. A full batch means more are waiting, so it claims again as soon as
slots free up; a short batch means the queues are drained, so it waits for
a notification from the dispatcher (or simply ``poll_every``: notifications
only cut latency, polling is the guarantee). While the queues stay busy it
also claims a little ahead (see :data:`jobrun.config.DEFAULT_CLAIM_AHEAD`).

A failed claim is logged on one line and retried after ``poll_every``. In
drain mode the loop ends by itself once a claim finds no due job and nothing
runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from jobrun.domain import HandoffOffer, Job
from jobrun.outages import process_outages
from jobrun.ports import Dispatcher, Executor
from jobrun.telemetry.hooks import Observer
from jobrun.worker.attempt import one_line
from jobrun.worker.claiming import ClaimPlan, plan_claim
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.signals import WorkerSignals
from jobrun.worker.state import WorkerState

__all__ = ["Claimer", "Offers"]


class Offers(Protocol):
    """The handoff side of a claim (:class:`jobrun.worker.handoff.Handoff`)."""

    def offer(self) -> HandoffOffer | None:
        """What to offer with the next claim, if anything."""
        ...

    def claim_started(self) -> None:
        """A claim is about to be sent."""
        ...

    def claim_done(self) -> None:
        """The claim returned or failed; its jobs are started or buffered."""
        ...


class Claimer:
    """Claims jobs of ``settings.queues`` for ``owner`` into ``state`` until the worker stops.

    ``start_ahead`` starts buffered jobs while slots are free; ``give_back``
    hands a job back; ``request_stop`` ends a drain.
    """

    def __init__(
        self,
        store: Executor,
        state: WorkerState,
        settings: WorkerSettings,
        *,
        owner: str,
        offers: Offers,
        start_ahead: Callable[[], None],
        give_back: Callable[[Job, str], None],
        request_stop: Callable[[], None],
        observer: Observer | None,
        signals: WorkerSignals,
        log: logging.Logger,
    ) -> None:
        self._store = store
        self._state = state
        self._queues = settings.queues
        self._owner = owner
        self._lease = settings.lease
        self._poll = settings.poll_every
        self._poll_every = settings.poll_every.total_seconds()
        self._dispatcher: Dispatcher | None = None
        self._offers = offers
        self._start_ahead = start_ahead
        self._give_back = give_back
        self._request_stop = request_stop
        self._observer = observer
        self._signals = signals
        self._log = log
        self._health = process_outages().part(log, "claims working again")

    async def run(self, dispatcher: Dispatcher | None, *, drain: bool = False) -> None:
        """Claim until a stop is requested (or, with ``drain``, nothing is due or running).

        Between claims that leave slots free it waits on ``dispatcher`` (or polls).
        """
        self._dispatcher = dispatcher
        state = self._state
        while not state.stopping.is_set():
            plan = plan_claim(
                concurrency=state.concurrency,
                executing=state.executing,
                held=len(state.running),
                buffered=len(state.ahead),
                wanted=state.ahead_wanted(),
            )
            if plan.wait:
                await self._wait_for_slot()
                continue
            settled_before = state.settled
            jobs = await self._claim(plan)
            if jobs is None:
                await self._idle(use_dispatcher=False)
                continue
            if len(jobs) < plan.limit:
                if drain:
                    if state.settled != settled_before:
                        # An outcome (a snooze, a retry due now) committed
                        # while this claim ran, maybe after its snapshot:
                        # claim once more before calling the queues drained.
                        continue
                    if not state.running and not state.ahead:
                        self._log.info("worker %s: nothing due and nothing running", self._owner)
                        self._request_stop()
                        return
                    # Something still runs: claim again once it ends, since
                    # its outcome (a hand-back, a snooze) may make work due.
                    state.wakeup.clear()
                    self._signals.idle.emit("slot")
                    await state.wakeup.wait()
                    continue
                await self._idle(use_dispatcher=True)

    async def _claim(self, plan: ClaimPlan) -> list[Job] | None:
        """Send one claim and start or buffer its jobs; None when it failed (logged)."""
        state = self._state
        # Handoffs are offered for idle slots only, never for the buffer.
        offer = self._offers.offer() if plan.ahead <= 0 else None
        self._offers.claim_started()
        try:
            jobs = await self._store.claim(
                self._queues, self._owner, plan.limit, self._lease, offer=offer
            )
        except Exception as exc:
            self._offers.claim_done()
            # One line per attempt, none during a database outage (the
            # process says it once); debug logging adds the tracebacks.
            self._health.failed(
                exc, "claim failed, retrying in %.1fs: %s", self._poll_every, one_line(exc)
            )
            return None
        self._health.ok()
        if jobs and self._observer is not None:
            self._observer.claimed(jobs)
        state.last_claim_full = len(jobs) >= plan.limit
        # In claim order, after those claimed before; a stop requested
        # while the claim ran leaves them buffered, to be handed back.
        claimed_at = time.monotonic()
        state.ahead.extend((job, claimed_at) for job in jobs)
        self._start_ahead()
        self._offers.claim_done()
        self._signals.claimed.emit(jobs)
        return jobs

    async def _wait_for_slot(self) -> None:
        """Every slot is taken: wait for one to free, handing back jobs buffered too long."""
        state = self._state
        # Every finishing job sets the wakeup, and so does a stop request;
        # with jobs buffered, so does their patience running out.
        state.wakeup.clear()
        self._signals.idle.emit("slot")
        if not state.ahead:
            await state.wakeup.wait()
            return
        timer = asyncio.get_running_loop().call_later(state.patience, state.wakeup.set)
        try:
            await state.wakeup.wait()
        finally:
            timer.cancel()
        stale = state.take_stale()
        if stale:
            reason = (
                f"handed back: it waited more than {state.patience:g}s "
                "for a slot of the worker that claimed it ahead"
            )
            for job in stale:
                self._give_back(job, reason)

    async def _idle(self, *, use_dispatcher: bool) -> None:
        """Wait for a notification, ``poll_every``, or a stop request, whichever comes first."""
        state = self._state
        if state.stopping.is_set():
            return
        self._signals.idle.emit("notification" if use_dispatcher else "retry")
        stopper = asyncio.ensure_future(state.stopping.wait())
        if use_dispatcher and self._dispatcher is not None:
            waiter: asyncio.Future[Any] = asyncio.ensure_future(
                self._dispatcher.wait(self._queues, self._poll)
            )
        else:
            waiter = asyncio.ensure_future(asyncio.sleep(self._poll_every))
        try:
            await asyncio.wait({stopper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            waiter.cancel()
            failure = waiter.exception() if waiter.done() and not waiter.cancelled() else None
            if failure is not None:
                self._log.warning(
                    "dispatcher wait failed, polling instead: %s",
                    one_line(failure),
                    exc_info=failure if self._log.isEnabledFor(logging.DEBUG) else None,
                )
                await asyncio.sleep(min(self._poll_every, 1.0))
