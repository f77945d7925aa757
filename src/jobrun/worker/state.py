"""What a worker's services share: the jobs it holds, its slot counts, its stop and wake events.

One :class:`WorkerState` per worker. The composer (:class:`jobrun.worker.Worker`)
alone starts and ends attempts; the services read it (the claimer sizes its
claims from it, the heartbeat extends the leases it lists) and act on the
attempts in it through :meth:`~jobrun.worker.attempt.Attempt.stop`.

The claim-ahead buffer lives here too: jobs leased beyond the free slots,
oldest first, each with the monotonic time it was claimed, and the start
rate that sizes it (:func:`jobrun.worker.claiming.ahead_target`).
"""

from __future__ import annotations

import asyncio
import collections
import time

from jobrun.domain import Job
from jobrun.errors import UsageError
from jobrun.worker.attempt import Attempt
from jobrun.worker.claiming import ahead_patience, ahead_target, free_slots

__all__ = ["WorkerState"]

# How often the start rate behind the buffer's size is measured.
_RATE_PERIOD = 0.05


class WorkerState:
    """The attempts and buffered jobs of one worker, and the events that steer its loops."""

    def __init__(self, concurrency: int, claim_ahead: float) -> None:
        self.concurrency = concurrency
        # Keyed by the job id as an int: a UUID hashes in Python, an int in C.
        self.running: dict[int, Attempt] = {}
        """Attempts running or reporting their outcome."""
        self.executing = 0
        """Attempts whose handler has not finished: the slots taken."""
        self.ahead: collections.deque[tuple[Job, float]] = collections.deque()
        """Claimed ahead (see :data:`jobrun.config.DEFAULT_CLAIM_AHEAD`), oldest first:
        leased, not started, with the monotonic time of their claim."""
        self.settled = 0
        """Attempts that have left ``running``, counted: a drain compares it across
        a claim to tell whether an outcome committed while the claim ran."""
        self.handing_back = False
        """True once the shutdown hands running jobs back: a successor is handed back too."""
        self.last_claim_full = False
        """Whether the last claim returned all it asked for: only then is a buffer kept."""
        self.claim_ahead = claim_ahead
        self.patience = ahead_patience(claim_ahead)
        """Seconds a buffered job waits for a slot before it is handed back."""
        self.starts = 0
        self._start_rate = 0.0
        self._rate_since = (time.monotonic(), 0)
        # Plain attributes, not properties: they are read for every job. An
        # asyncio.Event binds to a loop only when first waited on, so making
        # them here is safe; open() says the worker runs.
        self.stopping = asyncio.Event()
        """Set once a stop was requested: claim no more."""
        self.hard = asyncio.Event()
        """Set once running jobs are to be handed back without the grace period."""
        self.wakeup = asyncio.Event()
        """Set by every finishing job and stop request: the claim loop looks again."""
        self._open = False

    # -- events -------------------------------------------------------------------------------

    def open(self) -> None:
        """Mark the worker as running (from then on a stop can be requested)."""
        self._open = True

    def request_stop(self, *, graceful: bool = True) -> None:
        """Stop claiming; with ``graceful=False`` also skip the grace period for running jobs."""
        if not self._open:
            raise UsageError("the worker is not running")
        self.stopping.set()
        self.wakeup.set()
        if not graceful:
            self.hard.set()

    # -- what is held -------------------------------------------------------------------------

    @property
    def held(self) -> int:
        """Jobs held: running, reporting or claimed ahead."""
        return len(self.running) + len(self.ahead)

    def holds(self, job: Job) -> bool:
        """Whether ``job`` (by id) is running, reporting or buffered here."""
        return job.id.int in self.running or any(j.id == job.id for j, _ in self.ahead)

    def room(self) -> int:
        """Handler slots free now, maybe negative (:func:`~jobrun.worker.claiming.free_slots`)."""
        return free_slots(self.concurrency, self.executing, len(self.running))

    # -- the claim-ahead buffer ---------------------------------------------------------------

    def ahead_wanted(self) -> int:
        """How many jobs to hold claimed ahead now: ``claim_ahead``'s worth of starts."""
        if not self.last_claim_full or not self.claim_ahead:
            return 0
        now = time.monotonic()
        since, starts = self._rate_since
        if now - since >= _RATE_PERIOD:
            self._start_rate = (self.starts - starts) / (now - since)
            self._rate_since = (now, self.starts)
        return ahead_target(self._start_rate, self.claim_ahead, self.concurrency)

    def take_ahead(self, *, claimed_by: float | None = None) -> list[Job]:
        """Remove buffered jobs, oldest first: all, or those claimed by ``claimed_by``."""
        ahead = self.ahead
        taken: list[Job] = []
        while ahead and (claimed_by is None or ahead[0][1] <= claimed_by):
            taken.append(ahead.popleft()[0])
        return taken

    def take_stale(self) -> list[Job]:
        """Remove buffered jobs that waited past ``patience``, oldest first.

        The buffer holds what the worker was starting in ``claim_ahead``; jobs
        still waiting many times that long mean its running jobs got slower
        (a slow dependency, a burst of long jobs), and other workers may have
        free slots. Until a claim comes back full again, claims are then for
        free slots only.
        """
        limit = time.monotonic() - self.patience
        if not self.ahead or self.ahead[0][1] > limit:
            return []
        self.last_claim_full = False
        return self.take_ahead(claimed_by=limit)

    def drop_ahead(self, jobs: list[Job]) -> None:
        """Remove these buffered jobs (by identity, not id) from the buffer."""
        dropped = {id(job) for job in jobs}
        kept = [entry for entry in self.ahead if id(entry[0]) not in dropped]
        self.ahead.clear()
        self.ahead.extend(kept)
