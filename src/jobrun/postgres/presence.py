"""The Store's methods for worker presence: a worker's row written and deleted, and read back."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from jobrun.domain import MAX_REPORTED_RUNNING, RunningJob, WorkerInfo, WorkerReport
from jobrun.postgres.convert import utc
from jobrun.postgres.store_core import StoreCore
from jobrun.sqlc import workers as worker_queries

__all__ = ["PresenceMethods"]


class PresenceMethods(StoreCore):
    """Worker rows (migration 00017), mixed into :class:`jobrun.postgres.store.Store`."""

    async def worker_seen(self, report: WorkerReport) -> None:
        """Write the reporting worker's row: who it is, and the jobs it runs now
        (the first :data:`~jobrun.domain.MAX_REPORTED_RUNNING` of them)."""
        listed = [
            {
                "id": str(job.id),
                "type": job.type,
                "queue": job.queue,
                "started_at": job.started_at.isoformat(),
            }
            for job in report.running[:MAX_REPORTED_RUNNING]
        ]
        async with self._connection() as conn:
            await worker_queries.AsyncQuerier(conn).worker_seen(
                params=worker_queries.WorkerSeenParams(
                    owner=report.owner,
                    host=report.host,
                    pid=report.pid,
                    version=report.version,
                    queues=list(report.queues),
                    concurrency=report.concurrency,
                    beat=report.beat,
                    running=listed,
                    started_at=report.started_at,
                )
            )

    async def worker_gone(self, owner: str) -> None:
        """Delete ``owner``'s row: the worker stopped."""
        async with self._connection() as conn:
            await worker_queries.AsyncQuerier(conn).worker_gone(owner=owner)

    async def workers(self) -> list[WorkerInfo]:
        """Every worker row, alive or not yet pruned, by host and start."""
        async with self._connection() as conn:
            rows = await worker_queries.AsyncQuerier(conn).worker_list()
        return [_worker(row) for row in rows]

    async def prune_workers(self, older_than: timedelta = timedelta(hours=1)) -> int:
        """Delete the rows of workers not heard from for ``older_than``; how many."""
        async with self._connection() as conn:
            return await worker_queries.AsyncQuerier(conn).worker_prune(older_than=older_than)


def _worker(row: Any) -> WorkerInfo:
    running = tuple(
        RunningJob(
            id=UUID(item["id"]),
            type=item["type"],
            queue=item["queue"],
            started_at=datetime.fromisoformat(item["started_at"]),
        )
        for item in (row.running or [])
    )
    return WorkerInfo(
        owner=row.owner,
        host=row.host,
        pid=row.pid,
        version=row.version,
        queues=tuple(row.queues),
        concurrency=row.concurrency,
        beat=row.beat,
        started_at=utc(row.started_at),
        last_seen_at=utc(row.last_seen_at),
        alive=row.alive,
        leased=row.leased,
        running=running,
        seen_at=utc(row.now),
    )
