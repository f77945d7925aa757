"""Handoff: an idle worker's standing offer of free slots, which a single enqueue may take.

The mechanism itself is the store's (one statement inserts a job and leases
it to an offering worker) and the worker's (:mod:`jobrun.worker.handoff`);
here are the plain values they exchange.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import BaseModel

__all__ = ["HANDOFF_CONFIRM_WITHIN", "HandoffOffer", "WorkerOffer"]


HANDOFF_CONFIRM_WITHIN = timedelta(seconds=5)
"""How long a worker has to confirm a job handed to it (see :class:`HandoffOffer`)."""


@dataclass(frozen=True, slots=True)
class HandoffOffer:
    """What an idle worker offers along with a claim: its free slots, for handoff.

    A claim that leaves slots free records them as offers for each claimed
    queue, valid for ``ttl``; a single enqueue due now that finds one leases
    its job to the worker in the same statement and sends the whole job on
    ``channel``, where the worker's dispatcher receives it. Every claim
    rewrites the owner's offers, so they never outlive what the last claim
    knew; an offer left by a worker that died expires after ``ttl``.

    A handed job is leased only for ``confirm_within`` (or the claim's own
    lease, if shorter): the worker's heartbeat of it confirms that it arrived
    and extends the lease to the worker's own. A job the worker never
    received (its listening connection dropped just then) is so not stuck
    for a whole lease: the reaper gives it back as soon as the short lease
    runs out, due at once and its attempt not counted.
    """

    channel: str
    """The LISTEN channel on which the worker's dispatcher receives handed jobs."""
    ttl: timedelta
    """How long the offer stands without a new claim to renew it."""
    confirm_within: timedelta = HANDOFF_CONFIRM_WITHIN
    """The lease a handed job starts with, within which its worker confirms it."""


class WorkerOffer(BaseModel):
    """A standing handoff offer: ``owner`` takes ``slots`` more jobs of ``queue``."""

    owner: str
    queue: str
    channel: str
    slots: int
    lease: timedelta
    """The lease a handed job gets until its worker confirms it (see :class:`HandoffOffer`)."""
    expires_at: datetime
