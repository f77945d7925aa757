"""Handoff: jobs an enqueue leases straight to this worker, started without a claim.

With a dispatcher that is also a :class:`~jobrun.ports.HandoffReceiver`,
every claim that leaves slots free offers them
(:class:`~jobrun.domain.HandoffOffer`): a single enqueue due now then leases its
job to this worker in its own statement and the dispatcher delivers it, so
the handler starts without a claim. A handed job finds no free slot only
when offers crossed (several queues, a claim in flight) or the worker is
stopping; it is then handed back at once, due now and its attempt not
counted. A stopping worker withdraws its offers first. Drain mode never
offers. A handed job is leased only for
:data:`~jobrun.domain.HANDOFF_CONFIRM_WITHIN` (at most ``lease``) until the
worker confirms it (:mod:`jobrun._confirm`), so one it never received is
soon claimable by others again; one whose confirmation is refused (given
back meanwhile, or cancelled) is stopped.

A job handed while a claim is in flight waits for the claim to return: the
claim was sized before the handoff, so its jobs take the slots first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from jobrun._confirm import HandoffConfirmer
from jobrun.domain import HANDOFF_CONFIRM_WITHIN, HandoffOffer, Job
from jobrun.outages import process_outages
from jobrun.ports import Dispatcher, Executor, HandoffInbox, HandoffReceiver
from jobrun.telemetry.hooks import Observer
from jobrun.worker.attempt import STOP_CANCELLED, log_fields, one_line
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.state import WorkerState

__all__ = ["Handoff"]


class Handoff:
    """Offers ``state``'s free slots for ``owner`` and takes the jobs handed for them.

    ``start`` starts a handed job; ``give_back`` hands one back (queued, due
    now, the attempt not counted) with a reason. :meth:`confirm` runs the
    confirmations of the jobs started.
    """

    def __init__(
        self,
        store: Executor,
        state: WorkerState,
        settings: WorkerSettings,
        *,
        owner: str,
        start: Callable[[Job], None],
        give_back: Callable[[Job, str], None],
        observer: Observer | None,
        log: logging.Logger,
    ) -> None:
        self._store = store
        self._owner = owner
        self._state = state
        self._start = start
        self._give_back = give_back
        self._observer = observer
        self._log = log
        # Longer than an idle worker takes between two claims, each of which
        # renews the offers; an offer of a worker that died lasts this long.
        self._offer_ttl = 2 * settings.poll_every + timedelta(seconds=1)
        self._inbox: HandoffInbox | None = None
        self._confirmer = HandoffConfirmer(
            store,
            owner,
            lease=settings.lease,
            within=min(settings.lease, HANDOFF_CONFIRM_WITHIN),
            held=self._holds,
            lost=self._lost,
            logger=log,
        )
        self._claiming = False
        # Jobs handed in while a claim was in flight: started once it returns.
        self._handed_during_claim: list[Job] = []

    def open(self, dispatcher: Dispatcher | None) -> None:
        """Receive the jobs handed to this worker, if ``dispatcher`` can deliver them."""
        if isinstance(dispatcher, HandoffReceiver):
            self._inbox = dispatcher.receive_handoffs(self._owner, self._handed)

    async def confirm(self) -> None:
        """Confirm the jobs handed and started here as they come due; runs until cancelled."""
        await self._confirmer.run()

    def close(self) -> None:
        """Stop receiving handed jobs."""
        if self._inbox is not None:
            self._inbox.close()
            self._inbox = None

    def offer(self) -> HandoffOffer | None:
        """What to offer with the next claim: nothing unless handed jobs can arrive now."""
        inbox = self._inbox
        if inbox is None or not inbox.ready:
            return None
        if self._state.stopping.is_set():
            return None
        return HandoffOffer(
            channel=inbox.channel, ttl=self._offer_ttl, confirm_within=self._confirmer.within
        )

    def claim_started(self) -> None:
        """A claim is in flight: jobs handed meanwhile wait for it."""
        self._claiming = True

    def claim_done(self) -> None:
        """The claim returned (its jobs started or buffered): take the jobs handed meanwhile."""
        self._claiming = False
        handed, self._handed_during_claim = self._handed_during_claim, []
        for job in handed:
            if job.id.int not in self._state.running:
                self._take(job)

    async def retract(self) -> None:
        """A stopping worker takes no more handoffs (those already sent are given back)."""
        if self._inbox is None:
            return
        try:
            await self._store.retract_offers(self._owner)
        except Exception as exc:
            # They expire by themselves; jobs handed meanwhile are given back.
            process_outages().log_failure(
                self._log, exc, "could not withdraw handoff offers: %s", one_line(exc)
            )

    def _handed(self, job: Job) -> None:
        """A job an enqueue leased to this worker: start it, or give it back.

        Called by the dispatcher as the notification arrives, on this loop.
        """
        if self._state.holds(job):
            return
        if self._claiming:
            # The claim in flight was sized before this job was handed over.
            self._handed_during_claim.append(job)
            return
        self._take(job)

    def _take(self, job: Job) -> None:
        stopping = self._state.stopping.is_set()
        if self._state.room() > 0 and not stopping:
            if self._observer is not None:
                self._observer.claimed((job,))
            self._start(job)
            self._confirmer.add(job)
            return
        # No slot free (a multi-queue worker's offers overlap, or a claim's
        # rewrite crossed this handoff), or stopping: give it back at once,
        # due now and its attempt not counted, for another worker to claim.
        reason = "handed back: the worker had no free slot for a handed job"
        if stopping:
            reason = "handed back: the worker was stopping when the job was handed to it"
        self._give_back(job, reason)

    def _holds(self, job: Job) -> bool:
        """Whether this attempt of ``job`` still holds its lease here (running or reporting)."""
        run = self._state.running.get(job.id.int)
        return run is not None and run.job is job and not run.left

    def _lost(self, job: Job) -> None:
        """A handed job's confirmation was refused: someone else has it now, or it was cancelled."""
        run = self._state.running.get(job.id.int)
        if run is None or run.job is not job or run.reporting or run.stop_reason is not None:
            return
        self._log.warning(
            "job %s was handed here but could not be confirmed (it was given back, or "
            "cancelled); stopping it",
            job.id,
            extra=log_fields(run, self._owner, outcome="stopping"),
        )
        run.stop(STOP_CANCELLED)
