"""The Store's bulk enqueue: many jobs alike but for their payloads, in one transaction.

Built on :class:`~jobrun.postgres.enqueueing.EnqueueMethods`, whose batch it
takes for jobs with a uniqueness policy (each one's key depends on its payload).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Unpack
from uuid import UUID

from jobrun.domain import Job, JobOptions, new_job_id, new_job_ids
from jobrun.postgres import preparing
from jobrun.postgres.convert import utc
from jobrun.postgres.copyrows import JobCopyEncoder, copy_data
from jobrun.postgres.enqueueing import EnqueueMethods
from jobrun.postgres.store_core import COPY_CHUNK, copy_in
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import system as system_queries
from jobrun.telemetry.tracing import current_trace_meta

__all__ = ["BulkEnqueueMethods"]


class BulkEnqueueMethods(EnqueueMethods):
    """``enqueue_many``, beside the enqueue methods it builds on."""

    async def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Insert one job of ``job_type`` per payload, alike in all else, in one transaction.

        The bulk path: the shared fields (``queue``, ``priority``,
        ``max_attempts``, ``backoff``, ``delay`` or ``run_at``, as NewJob
        takes them) are validated once, each payload as JSON, all before
        anything is written; the jobs go in by COPY. Returns the new jobs' ids
        in payload order. With a ``unique`` policy the jobs go through
        :meth:`enqueue_batch`, one statement each, and a payload whose key
        another job holds gives that job's id. With ``conn`` the jobs join
        the caller's transaction.
        """
        many = preparing.prepare_many(
            job_type, payloads, options, self.payload_models, self.max_payload_bytes, self.job_types
        )
        if not many.texts:
            return []
        if many.template.unique is not None:
            # Each job's key depends on its payload: one statement per job.
            alike = [
                many.template.model_copy(update={"payload": payload, "id": new_job_id()})
                for payload in many.payloads
            ]
            made = await self.enqueue_batch(alike, conn=conn)
            return [job.id for job in made if isinstance(job, Job)]
        meta = current_trace_meta()
        ids = new_job_ids(len(many.texts))
        async with self._with_tx(conn) as tx:
            db_now = await system_queries.AsyncQuerier(tx).database_now()
            assert db_now is not None
            now = utc(db_now)
            due = preparing.run_at_of(many.template, now)
            queries = job_queries.AsyncQuerier(tx)
            events = event_queries.AsyncQuerier(tx)
            encoder = JobCopyEncoder(now, meta)
            job = many.template
            for start in range(0, len(ids), COPY_CHUNK):
                chunk = ids[start : start + COPY_CHUNK]
                texts = many.texts[start : start + COPY_CHUNK]
                rows = encoder.alike(
                    chunk, texts, queue=job.queue, job_type=job.type, priority=job.priority,
                    max_attempts=job.max_attempts, backoff=job.backoff, run_at=due,
                )  # fmt: skip
                await copy_in(tx, encoder.statement, copy_data(rows))
                await events.event_insert_enqueued_many(job_ids=chunk, at=now)
            await queries.job_notify(channel=self.notify_channel, queue=many.template.queue)
        if self.observer is not None:
            self.observer.enqueued(preparing.many_jobs(many, ids, due, now, meta))
        return ids
