"""The Store's operator methods on jobs: read, list, cancel, retry, results, events, depth."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID

from jobrun.domain import (
    MAX_WORKFLOW_STEPS,
    SEARCH_ROWS,
    Dependency,
    Event,
    Job,
    JobFilter,
    JobPage,
    JobProgress,
    JobState,
    QueueDepth,
    QueueStats,
    StateCounts,
    StoredResult,
    Workflow,
    WorkflowEdge,
    WorkflowStep,
    parse_job_id,
)
from jobrun.errors import (
    JobNotFound,
)
from jobrun.postgres import _base
from jobrun.postgres.convert import (
    depth_from_row,
    event_from_row,
    job_from_row,
    job_from_transition,
    queue_stats_from_row,
    utc,
)
from jobrun.postgres.store_core import (
    StoreCore,
)
from jobrun.sqlc import concurrency as concurrency_queries
from jobrun.sqlc import dependencies as dependency_queries
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import progress as progress_queries
from jobrun.sqlc import results as result_queries
from jobrun.sqlc import search as search_queries

__all__ = ["JobAdminMethods"]


class JobAdminMethods(StoreCore):
    """Job actions and reads, mixed into :class:`jobrun.postgres.store.Store`."""

    async def get(self, job_id: UUID) -> Job:
        """One job by id; JobNotFound when there is none, InvalidJob for a malformed id."""
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            row = await job_queries.AsyncQuerier(conn).job_get(id=job_id)
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    async def list_jobs(
        self,
        filter: JobFilter | None = None,
        *,
        limit: int = 50,
        cursor: UUID | None = None,
        search_rows: int = SEARCH_ROWS,
    ) -> JobPage:
        """A page of jobs matching ``filter``, newest first; keyset-paginated by id.

        A filter with a search field (:attr:`JobFilter.searches`) examines at
        most ``search_rows`` jobs, newest first from ``cursor``; when it stops
        there before filling the page, the page says so (``scan_cut``) and its
        ``next_cursor`` continues the search (see :mod:`jobrun.domain.search`).
        """
        if cursor is not None:
            cursor = parse_job_id(cursor)
        if filter is not None and filter.searches:
            search = _base.search_args(filter, limit, cursor, search_rows)
            async with self._connection() as conn:
                queries = search_queries.AsyncQuerier(conn)
                if isinstance(search, search_queries.JobSearchInStateParams):
                    found: Sequence[_base.SearchRow] = await queries.job_search_in_state(
                        params=search
                    )
                else:
                    found = await queries.job_search(params=search)
            return _base.search_page(found, limit, search_rows)
        args = _base.list_args(filter, limit, cursor)
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_list(params=args)
        return _base.page_of(rows, limit)

    async def cancel(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Cancel a job: a queued one ends cancelled now; a leased one gets a cancel request.

        The worker holding a cancel-requested job stops it at its next
        heartbeat, and the job ends cancelled. A finished job raises
        InvalidTransition. ``actor`` (who asked) is recorded in the event's
        detail as ``by <actor>``.
        """
        job_id = parse_job_id(job_id)
        async with self._with_tx() as tx:
            row = await job_queries.AsyncQuerier(tx).job_cancel(id=job_id, now=None, actor=actor)
        return job_from_transition(job_id, "cancel", row)

    async def retry(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Put a dead or cancelled job back in its queue, due now, and wake a worker.

        A job with a concurrency key goes back in its key's line instead, and
        is queued at once only when its key has room.

        ``actor`` (who asked) is recorded in the event's detail as ``by <actor>``.
        """
        job_id = parse_job_id(job_id)
        async with self._with_tx() as tx:
            queries = job_queries.AsyncQuerier(tx)
            row = await queries.job_retry(id=job_id, now=None, actor=actor)
            job = job_from_transition(job_id, "retry", row)
            if row is not None and row.concurrency_key is not None:
                # Back in its key's line; admitted now if the key has room.
                if job.id in await self._admit_keyed(tx, [row.concurrency_key]):
                    job = job.model_copy(update={"state": JobState.QUEUED})
                return job
            await queries.job_notify(channel=self.notify_channel, queue=job.queue)
        return job

    async def run_now(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Make a queued job that is not due yet (delayed, or waiting for a retry) due now.

        A queued job already due is returned as it is; any other state raises
        InvalidTransition. ``actor`` is recorded in the event's detail.
        """
        job_id = parse_job_id(job_id)
        async with self._with_tx() as tx:
            queries = job_queries.AsyncQuerier(tx)
            row = await queries.job_run_now(id=job_id, actor=actor)
            job = job_from_transition(job_id, "run now", row)
            await queries.job_notify(channel=self.notify_channel, queue=job.queue)
        return job

    async def delete_jobs(self, job_ids: Sequence[UUID]) -> list[UUID]:
        """Delete those of ``job_ids`` that are not running, with their events and results.

        Returns the ids deleted; a leased job (cancel it first) or one already
        gone is left out. The effect ledger keeps its rows. InvalidJob for a
        malformed id, before anything is deleted.
        """
        ids = [parse_job_id(job_id) for job_id in job_ids]
        if not ids:
            return []
        async with self._connection() as conn:
            return await job_queries.AsyncQuerier(conn).job_delete_many(ids=ids)

    async def state_counts(self) -> StateCounts:
        """How many jobs are in each state; succeeded's is an estimate (see StateCounts)."""
        async with self._connection() as conn:
            row = await job_queries.AsyncQuerier(conn).job_state_counts()
        assert row is not None  # a SELECT of scalars always returns its row
        others = row.queued + row.leased + row.waiting + row.dead + row.cancelled
        return StateCounts(
            queued=row.queued,
            leased=row.leased,
            waiting=row.waiting,
            dead=row.dead,
            cancelled=row.cancelled,
            succeeded_estimate=max(0, row.estimated_total - others),
        )

    async def dependencies_of(
        self, job_id: UUID, *, with_results: bool = False
    ) -> list[Dependency]:
        """The jobs ``job_id`` depends on, with their states now (and results, when asked)."""
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            rows = await dependency_queries.AsyncQuerier(conn).job_dependencies_of(
                job_id=job_id, with_results=with_results
            )
        return [
            Dependency(
                job_id=row.depends_on,
                state=None if row.state is None else JobState(str(row.state)),
                if_failed=row.if_failed,
                type=row.type,
                attempts=row.attempts,
                error=row.last_error,
                result=row.result,
            )
            for row in rows
        ]

    async def workflow(self, job_id: UUID, *, max_steps: int = MAX_WORKFLOW_STEPS) -> Workflow:
        """The jobs linked to ``job_id`` by dependencies, at most ``max_steps`` of them.

        JobNotFound when ``job_id`` is not a job (nor a purged step of one);
        InvalidJob for a malformed id.
        """
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            queries = dependency_queries.AsyncQuerier(conn)
            rows = await queries.job_workflow_steps(job_id=job_id, max_steps=max_steps + 1)
            if not rows or (len(rows) == 1 and rows[0].state is None):
                raise JobNotFound(job_id)
            complete = len(rows) <= max_steps
            # The one asked about first (the join need not keep the walk's order).
            rows.sort(key=lambda row: row.id != job_id)
            rows = rows[:max_steps]
            edges = await queries.job_workflow_edges(job_ids=[row.id for row in rows])
        return Workflow(
            steps=tuple(
                WorkflowStep(
                    job_id=row.id,
                    type=row.type,
                    queue=row.queue,
                    state=None if row.state is None else JobState(str(row.state)),
                    attempts=row.attempts,
                    created_at=None if row.created_at is None else utc(row.created_at),
                    finished_at=None if row.finished_at is None else utc(row.finished_at),
                    error=row.last_error,
                )
                for row in rows
            ),
            edges=tuple(
                WorkflowEdge(
                    depends_on=edge.depends_on, job_id=edge.job_id, if_failed=edge.if_failed
                )
                for edge in edges
            ),
            complete=complete,
        )

    async def settle_concurrency(self, batch_size: int = 1000) -> int:
        """Free the slots of keyed jobs that ended outside a completion, and admit; how many.

        Two walks, ``batch_size`` at a time: the rows of jobs with a
        concurrency key whose job ended (a reaper, an operator) or is gone
        are ended, and every key with waiting jobs is admitted for, each
        batch of keys in a transaction of its own (migration 00020). The
        admission after a completion does this for its keys; this catches
        the rest, including a worker that died between the two.
        """
        after = UUID(int=0)
        while True:
            async with self._connection() as conn:
                rows = await concurrency_queries.AsyncQuerier(conn).job_concurrency_settle(
                    after_id=after, batch_size=batch_size
                )
            cursor = next((row.last_id for row in rows if row.key is None), None)
            if cursor is None:
                break
            after = cursor
        admitted = 0
        after_key = ""
        while True:
            async with self._connection() as conn:
                keys = await concurrency_queries.AsyncQuerier(conn).job_keys_waiting(
                    after_key=after_key, batch_size=batch_size
                )
            if not keys:
                return admitted
            async with self._with_tx() as tx:
                admitted += len(await self._admit_keyed(tx, keys))
            after_key = keys[-1]

    async def settle_waiting(
        self, after: tuple[datetime, UUID] | None = None, batch_size: int = 1000
    ) -> tuple[int, tuple[datetime, UUID] | None]:
        """Queue (or cancel) waiting jobs whose dependencies have all ended, a batch at a time.

        Looks at up to ``batch_size`` waiting jobs in enqueue order after
        ``after`` (created_at, id). Returns how many it settled and the cursor
        of the last one it looked at (None: it reached the end).
        """
        start = after or (datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0))
        async with self._connection() as conn:
            rows = await dependency_queries.AsyncQuerier(conn).job_settle_waiting(
                after_created=start[0],
                after_id=start[1],
                batch_size=batch_size,
                channel=self.notify_channel,
            )
        settled = sum(1 for row in rows if str(row.state) != "waiting")
        if len(rows) < batch_size:
            return settled, None
        return settled, (utc(rows[-1].created_at), rows[-1].id)

    async def depth(self) -> list[QueueDepth]:
        """Job counts per queue and state, with the oldest creation time of each."""
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_depth()
        return [depth_from_row(r.queue, r.state, r.count, r.oldest_created_at) for r in rows]

    async def queue_stats(self) -> list[QueueStats]:
        """Per queue: jobs queued, due, leased, and the lag of the oldest due job.

        Reads only the claim and lease indexes, so its cost follows the backlog,
        not the table (finished jobs are never counted): cheap enough for a
        metrics timer.
        """
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_queue_stats()
        return [queue_stats_from_row(r) for r in rows]

    async def progress_of(self, job_ids: Sequence[UUID]) -> dict[UUID, JobProgress]:
        """The latest progress of those of ``job_ids`` that are running and reported one.

        A job's report shows only while it runs as the attempt that made it
        (:meth:`jobrun.registry.JobContext.progress`).
        """
        ids = [parse_job_id(job_id) for job_id in job_ids]
        if not ids:
            return {}
        async with self._connection() as conn:
            rows = await progress_queries.AsyncQuerier(conn).job_progress_of(ids=ids)
        return {
            row.job_id: JobProgress(
                fraction=row.fraction, message=row.message, updated_at=utc(row.updated_at)
            )
            for row in rows
        }

    async def result_of(self, job_id: UUID) -> StoredResult:
        """``job_id``'s state and, once it succeeded, what its handler returned.

        JobNotFound when there is no such job (or it was purged, its result
        with it); InvalidJob for a malformed id.
        """
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            row = await result_queries.AsyncQuerier(conn).job_result_of(id=job_id)
        if row is None:
            raise JobNotFound(job_id)
        return StoredResult(
            job_id=row.id,
            type=row.type,
            state=JobState(str(row.state)),
            value=row.result,
            error=row.last_error,
        )

    async def events(self, job_id: UUID) -> list[Event]:
        """The recorded transitions of a job, oldest first; InvalidJob for a malformed id."""
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            rows = await event_queries.AsyncQuerier(conn).event_list_by_job(job_id=job_id)
        return [event_from_row(r) for r in rows]
