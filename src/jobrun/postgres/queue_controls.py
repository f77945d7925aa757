"""The Store's queue controls: pause, resume, fleet-wide limits, listing, and clearing a queue."""

from __future__ import annotations

from datetime import timedelta

from jobrun.domain import (
    QueueControls,
    QueueInfo,
)
from jobrun.errors import ConfirmationNeeded
from jobrun.postgres import _base
from jobrun.postgres.convert import (
    queue_from_row,
    queue_info_from_row,
)
from jobrun.postgres.store_core import (
    StoreCore,
)
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import queues as queue_queries

__all__ = ["CLEAR_BATCH", "QueueControlMethods"]

CLEAR_BATCH = 500
"""How many jobs one statement of a queue's clear deletes (each batch its own transaction)."""


class QueueControlMethods(StoreCore):
    """Queue controls, mixed into :class:`jobrun.postgres.store.Store`."""

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue with controls or with queued or leased jobs, by name.

        Each comes with its controls and how many of its jobs are queued and
        leased right now (counted from the partial indexes of those states).
        """
        async with self._connection() as conn:
            rows = await queue_queries.AsyncQuerier(conn).queue_list()
        return [queue_info_from_row(r) for r in rows]

    async def pause_queue(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Stop every worker from claiming jobs of queue ``name``, from the next claim on.

        Jobs already leased run to their end; jobs can still be enqueued.
        ``actor`` (who asked) is stored as the queue's ``changed_by``, as by
        every queue control; None stores that the change named nobody.
        """
        return await self._set_paused(name, paused=True, actor=actor)

    async def resume_queue(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Let workers claim jobs of a paused queue again; ``actor`` as for a pause."""
        return await self._set_paused(name, paused=False, actor=actor)

    async def _set_paused(self, name: str, *, paused: bool, actor: str | None) -> QueueControls:
        _base.check_queue_name(name)
        actor = _base.bounded_actor(actor)
        async with self._connection() as conn:
            row = await queue_queries.AsyncQuerier(conn).queue_set_paused(
                name=name, paused=paused, actor=actor
            )
        assert row is not None  # an upsert always returns its row
        return queue_from_row(row)

    async def set_queue_limits(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate: tuple[int, timedelta] | None = None,
        actor: str | None = None,
        key_limit: int | None = None,
    ) -> QueueControls:
        """Limit queue ``name`` across every worker; a limit left None stays as it was.

        ``concurrency``: at most that many of its jobs leased at once.
        ``rate``: ``(count, interval)``, at most ``count`` claims per
        ``interval``, counted in fixed windows of ``interval`` aligned to the
        epoch. Applies from the next claim on; leases above a lowered
        concurrency limit are not taken back, the queue just claims nothing
        until it is below it. ``key_limit``: the limit per concurrency key of
        the queue's keyed jobs that give none of their own (see
        ``NewJob.concurrency_key``); it applies to the admissions after it.
        ConfigurationError when none is given or a
        value is out of range or not a whole number (a float, a bool), before
        anything is sent. ``actor`` as for :meth:`pause_queue`.
        """
        args = _base.limits_args(name, concurrency, rate, actor, key_limit)
        async with self._connection() as conn:
            row = await queue_queries.AsyncQuerier(conn).queue_set_limits(params=args)
        assert row is not None  # an upsert always returns its row
        return queue_from_row(row)

    async def clear_queue_limits(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Remove both limits of queue ``name``; a pause stays as it is; records ``actor``."""
        _base.check_queue_name(name)
        async with self._connection() as conn:
            row = await queue_queries.AsyncQuerier(conn).queue_clear_limits(
                name=name, actor=_base.bounded_actor(actor)
            )
        return queue_from_row(row) if row is not None else QueueControls(name=name)

    async def clear_queue(self, name: str, *, confirm: int | None, actor: str | None = None) -> int:
        """Delete queue ``name``'s jobs that are neither running nor finished; how many went.

        Those are its queued jobs (due or not) and its waiting ones, with
        their events; running jobs are left to finish, finished ones to
        retention. ``confirm`` must be the number of such jobs now, else
        :class:`~jobrun.errors.ConfirmationNeeded` carries that number and
        nothing is deleted. The jobs counted are deleted in batches of
        :data:`CLEAR_BATCH`: one claimed meanwhile is skipped, and jobs
        enqueued after the count are kept. ``actor`` is who asked; jobs keep
        no trace once deleted, so the caller logs it.
        """
        _base.check_queue_name(name)
        async with self._connection() as conn:
            counted = await queue_queries.AsyncQuerier(conn).queue_clearable_count(queue=name)
        assert counted is not None  # a SELECT of scalars always returns its row
        total = counted.queued + counted.waiting
        if confirm != total:
            raise ConfirmationNeeded(total)
        deleted = 0
        while True:
            async with self._connection() as conn:
                ids = await queue_queries.AsyncQuerier(conn).queue_clearable_ids(
                    queue=name, counted_at=counted.counted_at, batch_size=CLEAR_BATCH
                )
                if not ids:
                    return deleted
                deleted += len(await job_queries.AsyncQuerier(conn).job_delete_many(ids=ids))
