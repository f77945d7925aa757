"""The Store's lease methods: claim (with handoff offers), heartbeat and the reaper's sweep."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from uuid import UUID

from jobrun.domain import (
    EventMode,
    HandoffOffer,
    Job,
    WorkerOffer,
)
from jobrun.postgres.convert import (
    job_from_row,
    offer_from_row,
)
from jobrun.postgres.store_core import (
    NO_OFFER_TTL,
    StoreCore,
    one_exchange,
)
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models
from jobrun.sqlc import offers as offer_queries
from jobrun.sqlc import progress as progress_queries

__all__ = ["LeaseMethods"]


class LeaseMethods(StoreCore):
    """Leases, mixed into :class:`jobrun.postgres.store.Store`."""

    async def claim(
        self,
        queues: Sequence[str],
        owner: str,
        limit: int,
        lease: timedelta,
        *,
        offer: HandoffOffer | None = None,
        now: datetime | None = None,
    ) -> list[Job]:
        """Lease up to ``limit`` due jobs of ``queues`` for ``owner``, in claim order.

        One statement: queued → leased, attempts + 1, lease until db now +
        ``lease``; in event mode ``all`` the same statement records the claims.
        The same statement rewrites ``owner``'s handoff offers: with ``offer``,
        the slots this claim leaves free are offered for each of ``queues``;
        without it (or with none left) the owner's offers are withdrawn. A job
        handed through them is leased for ``offer.confirm_within`` (at most
        ``lease``) until a heartbeat confirms it. ``now`` pins the clock that
        decides which jobs are due and when the leases end (tests); it
        defaults to the database's.
        """
        if limit <= 0 or not queues:
            return []
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(one_exchange(conn)).job_claim(
                params=job_queries.JobClaimParams(
                    queues=list(queues),
                    owner=owner,
                    max_jobs=limit,
                    lease=lease,
                    now=now,
                    offer_channel=None if offer is None else offer.channel,
                    offer_lease=lease if offer is None else min(lease, offer.confirm_within),
                    offer_ttl=NO_OFFER_TTL if offer is None else offer.ttl,
                    record_events=self.event_mode is EventMode.ALL,
                )
            )
        jobs = [job_from_row(r) for r in rows]
        # id.int: comparing UUIDs calls Python-level __lt__, and ties on
        # priority and run_at are the rule for batch-enqueued jobs.
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id.int))
        return jobs

    async def retract_offers(self, owner: str) -> int:
        """Withdraw every handoff offer of ``owner``; return how many there were.

        A stopping worker calls it first, so no enqueue hands it a job it
        would only have to give back.
        """
        async with self._connection() as conn:
            return await offer_queries.AsyncQuerier(conn).worker_offers_withdraw(owner=owner)

    async def offers(self) -> list[WorkerOffer]:
        """The handoff offers standing now (operators and tests), by queue and owner."""
        async with self._connection() as conn:
            rows = await offer_queries.AsyncQuerier(conn).worker_offers_list()
        return [offer_from_row(r) for r in rows]

    async def heartbeat(
        self,
        owner: str,
        jobs: Sequence[Job],
        lease: timedelta,
        *,
        progress: Sequence[tuple[Job, float, str]] = (),
    ) -> set[UUID]:
        """Extend ``owner``'s leases on ``jobs`` to db now + ``lease``; return the ids kept.

        A job is kept while the lease fence holds: ``owner`` holds it, it is
        still the attempt that was claimed, and its lease has not expired.
        Jobs whose cancel was requested are left out as well: the worker must
        stop every job missing from the result.

        ``progress`` holds ``(job, fraction, message)`` reports
        (:meth:`jobrun.registry.JobContext.progress`); each is written for
        the attempt ``job`` is, if ``owner`` still holds it.
        """
        if not jobs:
            return set()
        async with self._connection() as conn:
            kept = await job_queries.AsyncQuerier(conn).job_heartbeat(
                params=job_queries.JobHeartbeatParams(
                    ids=[j.id for j in jobs],
                    attempts=[j.attempts for j in jobs],
                    owner=owner,
                    lease=lease,
                    now=None,
                )
            )
            if progress:
                await progress_queries.AsyncQuerier(conn).job_progress_record(
                    params=progress_queries.JobProgressRecordParams(
                        ids=[job.id for job, _, _ in progress],
                        attempts=[job.attempts for job, _, _ in progress],
                        fractions=[fraction for _, fraction, _ in progress],
                        messages=[message for _, _, message in progress],
                        owner=owner,
                    )
                )
        return set(kept)

    async def reap_expired(self, limit: int = 1000, *, now: datetime | None = None) -> list[Job]:
        """Requeue, kill or cancel jobs whose lease expired by database now (or ``now``).

        An expired lease is a failed attempt (the claim already counted it, so
        a crash costs one): queued after the job's own backoff, dead when its
        attempts are spent, cancelled when a cancel was requested. The same
        rule as :meth:`jobrun.postgres.store.Store.fail`, decided by the same
        database function.
        """
        async with self._with_tx() as tx:
            queries = job_queries.AsyncQuerier(tx)
            rows = await queries.job_reap_expired(max_jobs=limit, jitter=self.retry_jitter, now=now)
            notify = sorted({r.queue for r in rows if r.state == models.JobState.QUEUED})
            for queue in notify:
                await queries.job_notify(channel=self.notify_channel, queue=queue)
        return [job_from_row(r) for r in rows]
