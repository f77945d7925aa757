"""The one statement that records outcomes without a commit callback, for many jobs at once."""

from __future__ import annotations

from collections.abc import Sequence

from jobrun.domain import Job, Outcome, OutcomeKind, storable_text
from jobrun.errors import LeaseLost
from jobrun.outages import is_outage
from jobrun.postgres.convert import job_recorded
from jobrun.postgres.store_core import StoreCore, log, one_exchange
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models

__all__ = ["OutcomeRowMethods"]

_OUTCOMES = {kind: models.JobOutcome(kind.value) for kind in OutcomeKind}


class OutcomeRowMethods(StoreCore):
    """Recording plain outcomes (no callback) in one statement, under the lease fence."""

    async def _record_plain(
        self, owner: str, outcomes: Sequence[Outcome], results: dict[int, Job | Exception]
    ) -> set[str]:
        """Record ``outcomes`` in one statement; if it fails, each in a statement of its own.

        A failure that is not an outage may be one outcome's fault; recorded
        one by one, only that job gets the error and the others are recorded.
        """
        try:
            return await self._record_on_connection(owner, outcomes, results)
        except Exception as exc:
            if len(outcomes) == 1 or is_outage(exc):
                raise
            log.warning(
                "recording %d outcomes at once failed, recording each: %s", len(outcomes), exc
            )
        freed: set[str] = set()
        for outcome in outcomes:
            try:
                freed |= await self._record_on_connection(owner, [outcome], results)
            except Exception as single:
                if is_outage(single):
                    raise
                results[outcome.job.id.int] = single
        return freed

    async def _record_on_connection(
        self, owner: str, outcomes: Sequence[Outcome], results: dict[int, Job | Exception]
    ) -> set[str]:
        async with self._connection() as conn:
            return await self._record(
                job_queries.AsyncQuerier(one_exchange(conn)), owner, outcomes, results
            )

    async def _record(
        self,
        queries: job_queries.AsyncQuerier,
        owner: str,
        outcomes: Sequence[Outcome],
        results: dict[int, Job | Exception],
    ) -> set[str]:
        """Record ``outcomes`` in one statement; LeaseLost for the jobs the fence refused.

        Returns the concurrency keys whose slots the jobs it ended gave up.
        """
        rows = await queries.job_record_outcomes(
            params=job_queries.JobRecordOutcomesParams(
                ids=[o.job.id for o in outcomes],
                attempts=[o.job.attempts for o in outcomes],
                outcomes=[_OUTCOMES[o.kind] for o in outcomes],
                # A handler's message may hold what text columns refuse (a
                # NUL, a lone surrogate): written out, or the whole batch's
                # statement would fail and no job in it be recorded.
                details=[storable_text(o.detail) if o.detail else "" for o in outcomes],
                delays=[o.delay for o in outcomes],
                attempt_limits=[o.max_attempts or 0 for o in outcomes],
                owner=owner,
                jitter=self.retry_jitter,
                now=None,
                channel=self.notify_channel,
                result_ids=[o.job.id for o in outcomes if o.result is not None],
                result_values=[o.result for o in outcomes if o.result is not None],
            )
        )
        # Keyed by the ids' integers: a UUID hashes in Python, an int in C,
        # and this runs a few times per job on the worker's hottest path.
        by_key = {o.job.id.int: o.job for o in outcomes}
        for row in rows:
            key = row.id.int
            results[key] = job_recorded(by_key[key], row)
        for outcome in outcomes:
            key = outcome.job.id.int
            if key not in results:
                results[key] = LeaseLost(outcome.job.id, owner)
        return {row.concurrency_key for row in rows if row.concurrency_key is not None}
