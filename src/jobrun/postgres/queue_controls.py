"""The Store's queue controls: pause, resume and fleet-wide limits, and listing them."""

from __future__ import annotations

from datetime import timedelta

from jobrun.domain import (
    QueueControls,
    QueueInfo,
)
from jobrun.postgres import _base
from jobrun.postgres.convert import (
    queue_from_row,
    queue_info_from_row,
)
from jobrun.postgres.store_core import (
    StoreCore,
)
from jobrun.sqlc import queues as queue_queries

__all__ = ["QueueControlMethods"]


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
