"""The Store's enqueue methods: one job, a batch, and idempotent replays.

Many jobs alike (``enqueue_many``) are :mod:`jobrun.postgres.bulk_enqueueing`'s.
"""

from __future__ import annotations

import asyncio  # sync: skip
import contextlib  # sync: skip
from collections.abc import Coroutine, Sequence
from datetime import datetime
from typing import Any

from jobrun._gc_tuning import young_threshold_raised
from jobrun.domain import (
    EventMode,
    Job,
    JobState,
    NewJob,
)
from jobrun.errors import (
    IdempotencyConflict,
    JobrunError,
)
from jobrun.postgres import dependents, keyed_jobs, preparing, unique_jobs
from jobrun.postgres.convert import (
    job_from_new,
    job_from_row,
    utc,
)
from jobrun.postgres.copyrows import JobCopyEncoder, copy_slice
from jobrun.postgres.store_core import (
    COPY_CHUNK,
    COPY_SLICE,
    StoreCore,
    copy_stream,
    one_exchange,
)
from jobrun.sqlc import concurrency as concurrency_queries
from jobrun.sqlc import dependencies as dependency_queries
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import locks as lock_queries
from jobrun.sqlc import models
from jobrun.sqlc import unique as unique_queries
from jobrun.telemetry.tracing import current_trace_meta

__all__ = ["EnqueueMethods"]


class EnqueueMethods(StoreCore):
    """Enqueueing, mixed into :class:`jobrun.postgres.store.Store`."""

    async def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Insert ``job``, or return the stored job when it replays an idempotency key.

        A replay (same key, same body) returns the stored job, whose ``id``
        differs from ``job.id``; a different body raises IdempotencyConflict.
        A job with a uniqueness policy (``job.unique``) whose key another job
        holds is not inserted: that job is returned, its ``id`` differing
        from ``job.id``. With ``conn`` the job joins the caller's transaction
        and commits (and notifies) with it or not at all.
        """
        (item,) = preparing.prepare_jobs(
            [job], self.payload_models, self.max_payload_bytes, self.job_types
        )
        meta = current_trace_meta()
        if job.unique is not None or job.depends_on or job.concurrency_key is not None:
            async with self._with_tx(conn) as tx:
                made, fresh = await self._insert_one_by_one(tx, item, meta)
            if fresh and self.observer is not None:
                self.observer.enqueued((made,))
            return made
        if conn is None:
            # The common path: one statement on an autocommit pooled connection
            # inserts the job and its event and notifies, or hands the job to
            # an idle worker's offer; it commits as it ends.
            async with self._connection() as pooled:
                queries = job_queries.AsyncQuerier(one_exchange(pooled))
                hints = self._offer_hints
                if preparing.handoff_allowed(item, meta) and hints.worth_looking(job.queue):
                    params = preparing.insert_args(
                        item,
                        self.notify_channel,
                        meta,
                        record_claim=self.event_mode is EventMode.ALL,
                    )
                    handed = await queries.job_insert_notify(params=params)
                    if handed is None:  # it has no idempotency key to conflict on
                        raise JobrunError(f"job {job.id} was not inserted")
                    hints.found(job.queue, handed.offered)
                    made, fresh = preparing.inserted_job(item, handed, meta), True
                else:
                    made, fresh = await self._insert_queued(queries, item, meta)
        else:
            # Never handed off: the caller's transaction may commit long after
            # the lease it would start, or not at all.
            async with self._with_tx(conn) as tx:
                queries = job_queries.AsyncQuerier(tx)
                made, fresh = await self._insert_queued(queries, item, meta)
        if fresh and self.observer is not None:
            self.observer.enqueued((made,))
        return made

    async def _insert_queued(
        self,
        queries: job_queries.AsyncQuerier,
        item: preparing.PreparedJob,
        meta: dict[str, str] | None,
    ) -> tuple[Job, bool]:
        """Insert ``item`` queued (never handed off), or find the job its key replays.

        Runs where the caller runs it (a pooled connection, or the caller's
        transaction); true with the job when it was inserted. The statement
        also says whether an idle worker offers a slot for the queue now,
        which the next enqueue's choice of statement follows.
        """
        params = preparing.queued_insert_args(item, self.notify_channel, meta)
        row = await queries.job_insert_queued_notify(params=params)
        if row is None:
            return await self._replay(queries, item, params)
        self._offer_hints.found(item.job.queue, row.offered)
        return preparing.inserted_job(item, row, meta), True

    async def _insert_one_by_one(
        self, tx: Any, item: preparing.PreparedJob, meta: dict[str, str] | None
    ) -> tuple[Job, bool]:
        """Insert a job with a uniqueness policy, dependencies or a concurrency key.

        Each by a statement of its own; a job with a concurrency key is
        inserted under its key's lock and admitted at once if its key has room.
        """
        key = item.job.concurrency_key
        if key is not None:
            keyed_args = keyed_jobs.insert_args(item, meta)
            await lock_queries.AsyncQuerier(tx).key_lock_many(ids=keyed_jobs.lock_ids([key]))
            inserted = await concurrency_queries.AsyncQuerier(tx).job_insert_keyed(
                params=keyed_args
            )
            if inserted is None:
                raise keyed_jobs.no_limit(item)
            admitted = await self._admit_keyed(tx, [key])
            made = job_from_new(
                item.job, item.payload, utc(inserted.run_at), utc(inserted.created_at), meta
            )
            if item.job.id not in admitted:
                made = made.model_copy(update={"state": JobState.WAITING})
            return made, True
        if not item.job.depends_on:
            return await _insert_unique(tx, item, self.notify_channel, meta)
        params = dependents.insert_args(item, self.notify_channel, meta)
        row = await dependency_queries.AsyncQuerier(tx).job_insert_dependent(params=params)
        return dependents.inserted(item, row, meta), True

    async def _replay(
        self,
        queries: job_queries.AsyncQuerier,
        item: preparing.PreparedJob,
        params: job_queries.JobInsertQueuedNotifyParams,
    ) -> tuple[Job, bool]:
        """The stored job that ``item``'s insert conflicted with, or ``item`` inserted after all.

        Runs where the insert ran (the pooled connection, or the caller's
        transaction). Raises IdempotencyConflict when the stored body differs.
        """
        job = item.job
        stored = await queries.job_get_by_idempotency_key(
            queue=job.queue, idempotency_key=job.idempotency_key or ""
        )
        if stored is not None:
            return preparing.check_replay(item, job_from_row(stored)), False
        # The conflicting row was purged between our insert and read: retry once.
        row = await queries.job_insert_queued_notify(params=params)
        if row is None:
            raise JobrunError(f"could not insert or read job key {job.idempotency_key}")
        return preparing.inserted_job(item, row, params.meta), True

    async def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Insert many jobs in one transaction; one result per input, in order.

        Jobs without an idempotency key go through COPY; keyed jobs through
        one ``INSERT .. ON CONFLICT DO NOTHING``, so a replay returns the
        stored job and a conflicting body is reported as an IdempotencyConflict
        in its slot while the rest are inserted. Every job is validated before
        its row is sent, and a bad one leaves nothing stored; in a caller's
        transaction (``conn``) nothing at all is sent until every job is valid.
        """
        if not jobs:
            return []
        with young_threshold_raised(self.gc_young_threshold):
            return await self._enqueue_batch(jobs, conn)

    async def _enqueue_batch(
        self, jobs: Sequence[NewJob], conn: Any | None
    ) -> list[Job | IdempotencyConflict]:
        results: list[Job | IdempotencyConflict | None] = [None] * len(jobs)
        meta = current_trace_meta()
        fresh: list[Job] = []
        async with self._with_tx(conn) as tx:
            queries = job_queries.AsyncQuerier(tx)
            events = event_queries.AsyncQuerier(tx)
            plain_ids = [job.id for job in jobs if preparing.is_plain(job)]
            if conn is None:  # sync: else
                prepared, db_now = await self._prepare_while(
                    events.event_insert_enqueued_now(job_ids=plain_ids), jobs
                )
            else:
                prepared = self._prepare(jobs)
                db_now = await events.event_insert_enqueued_now(job_ids=plain_ids)
            assert db_now is not None
            now = utc(db_now)
            queues: set[str] = set()
            plain, keyed, unique = preparing.split_batch(prepared)
            limited = {p.job.concurrency_key for p in prepared if p.job.concurrency_key is not None}
            if limited:
                # Every key of the batch, in the one global order, before any insert:
                # two batches sharing keys then wait on each other but never deadlock.
                await lock_queries.AsyncQuerier(tx).key_lock_many(ids=keyed_jobs.lock_ids(limited))
            encoder = JobCopyEncoder(now, meta)
            # Chunks bound the memory of one COPY.
            for start in range(0, len(plain), COPY_CHUNK):
                chunk = plain[start : start + COPY_CHUNK]
                copied = await self._copy_plain(tx, encoder, prepared, chunk, now, meta)
                for index, job in zip(chunk, copied, strict=True):
                    results[index] = job
                    queues.add(job.queue)
                fresh += copied
            if keyed:
                new_jobs = await self._insert_keyed(queries, prepared, keyed, now, results, meta)
                fresh += new_jobs
                if new_jobs:
                    await events.event_insert_enqueued_many(
                        job_ids=[j.id for j in new_jobs], at=now
                    )
                    queues.update(j.queue for j in new_jobs)
            for index in unique:
                # One statement each (it notifies its own queue), in input order:
                # a job may depend on one earlier in the batch.
                made, is_new = await self._insert_one_by_one(tx, prepared[index], meta)
                results[index] = made
                if is_new:
                    fresh.append(made)
            for queue in sorted(queues):
                await queries.job_notify(channel=self.notify_channel, queue=queue)
        if self.observer is not None and fresh:
            self.observer.enqueued(fresh)
        return [r for r in results if r is not None]

    def _prepare(self, jobs: Sequence[NewJob]) -> list[preparing.PreparedJob]:
        return preparing.prepare_jobs(
            jobs, self.payload_models, self.max_payload_bytes, self.job_types
        )

    async def _prepare_while(  # sync: skip
        self, statement: Coroutine[Any, Any, datetime | None], jobs: Sequence[NewJob]
    ) -> tuple[list[preparing.PreparedJob], datetime | None]:
        """Validate ``jobs`` while the server runs ``statement``; both results.

        The statement is sent first (one turn of the event loop), then the
        validation holds the loop while the server works: on two cores the
        client's CPU and the server's overlap. A refused job waits for the
        statement to end before raising, so the transaction can roll back.
        """
        running = asyncio.ensure_future(statement)
        try:
            await asyncio.sleep(0)
            prepared = self._prepare(jobs)
        except BaseException:
            # The refusal (or the cancellation) is what the caller needs; the
            # statement's own outcome no longer matters, as the transaction
            # rolls back, but it must end before the rollback is sent.
            with contextlib.suppress(Exception):
                await running
            raise
        return prepared, await running

    async def _copy_plain(
        self,
        tx: Any,
        encoder: JobCopyEncoder,
        prepared: list[preparing.PreparedJob],
        chunk: Sequence[int],
        now: datetime,
        meta: dict[str, str] | None,
    ) -> list[Job]:
        """COPY the jobs ``chunk`` points at into jobs; the Jobs stored, in order.

        The rows go to the server a slice at a time while the next slice is
        encoded, so the server inserts one while the client builds the next
        instead of waiting for the whole stream: on two cores the client's
        encoding and the server's inserts overlap.
        """
        made: list[Job] = []
        async with copy_stream(tx, encoder.statement) as copy:
            for start in range(0, len(chunk), COPY_SLICE):
                rows = []
                for index in chunk[start : start + COPY_SLICE]:
                    item = prepared[index]
                    job = item.job
                    run_at = preparing.run_at_of(job, now)
                    rows.append(
                        encoder.row(
                            job.id, job.queue, job.type, item.text, job.priority,
                            job.max_attempts, job.backoff, run_at, None,
                        )
                    )  # fmt: skip
                    made.append(job_from_new(job, item.payload, run_at, now, meta))
                await copy.write(copy_slice(rows))
        return made

    async def _insert_keyed(
        self,
        queries: job_queries.AsyncQuerier,
        prepared: list[preparing.PreparedJob],
        keyed: list[int],
        now: Any,
        results: list[Job | IdempotencyConflict | None],
        meta: dict[str, str] | None,
    ) -> list[Job]:
        inserted: list[Job] = []
        for start in range(0, len(keyed), COPY_CHUNK):
            chunk = keyed[start : start + COPY_CHUNK]
            items = [prepared[i] for i in chunk]
            params = preparing.keyed_arrays(items, now, meta)
            new_ids = set(await queries.job_insert_keyed_many(params=params))
            missing = [i for i in chunk if prepared[i].job.id not in new_ids]
            stored: list[models.Job] = []
            if missing:
                stored = await queries.job_get_by_idempotency_keys(
                    queues=[prepared[i].job.queue for i in missing],
                    idempotency_keys=[prepared[i].job.idempotency_key or "" for i in missing],
                )
            inserted += preparing.keyed_results(
                prepared, chunk, new_ids, stored, now, results, meta
            )
        return inserted


async def _insert_unique(
    tx: Any, item: preparing.PreparedJob, channel: str, meta: dict[str, str] | None
) -> tuple[Job, bool]:
    """Insert ``item`` (it has a uniqueness policy) or find the job holding its key.

    Returns the job and whether it is the new one. Runs in ``tx``: a
    transaction, so a holder that committed while this insert waited is
    visible to the read that follows. ``channel`` is the notification channel.
    """
    params = unique_jobs.insert_args(item, channel, meta)
    queries = unique_queries.AsyncQuerier(tx)
    for _ in range(unique_jobs.TRIES):
        row = await queries.job_insert_unique(params=params)
        if row is not None:
            now = utc(row.created_at)
            return job_from_new(item.job, item.payload, utc(row.run_at), now, meta), True
        holder = await queries.job_get_unique_holder(
            unique_base=params.unique_base, period=params.period
        )
        if holder is not None:
            return job_from_row(holder), False
    raise JobrunError(f"could not insert or find the holder of job {item.job.id}'s unique key")
