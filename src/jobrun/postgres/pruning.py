"""The Store's retention methods: purging finished jobs, pruning events and effects, statistics."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobrun.domain import (
    JobState,
)
from jobrun.errors import (
    ConfigurationError,
)
from jobrun.postgres import _base
from jobrun.postgres.store_core import (
    StoreCore,
)
from jobrun.sqlc import effects as effect_queries
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import models
from jobrun.sqlc import progress as progress_queries
from jobrun.sqlc import system as system_queries

__all__ = ["PruningMethods"]


class PruningMethods(StoreCore):
    """Retention, mixed into :class:`jobrun.postgres.store.Store`."""

    async def purge(
        self, older_than: timedelta, batch_size: int = 1000, *, now: datetime | None = None
    ) -> int:
        """Delete finished jobs (and their events) older than ``older_than``.

        Age is measured by the database clock. Works in batches of
        ``batch_size``, each its own short transaction, so no lock is held long.
        The effect ledger keeps its rows (see :meth:`prune_effects`), so an old
        idempotency key replayed after a purge does not run its effect again.
        """
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        _base.check_older_than(older_than)
        total = 0
        # One terminal state at a time: each pass is a range scan of
        # jobs_finished_state_idx, the one index of finished jobs.
        for state in sorted(_base.FINISHED_STATES):
            while True:
                deleted = await self.purge_finished_batch(state, older_than, batch_size, now=now)
                total += deleted
                if deleted < batch_size:
                    break
        return total

    async def prune_effects(
        self, older_than: timedelta, batch_size: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete ledger rows older than ``older_than`` no job needs; return how many.

        The ledger is what stops a replayed idempotency key from running its
        effect twice, so it is pruned on its own, longer clock than the jobs:
        a key replayed after its ledger row is pruned runs its effect again.
        A row is never pruned while its job, or any job of its effect key
        (type, queue, idempotency key: a replay queued after a purge), exists.
        """
        _base.check_older_than(older_than)
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        total = 0
        while True:
            async with self._connection() as conn:
                deleted = await effect_queries.AsyncQuerier(conn).effect_prune(
                    older_than=older_than, batch_size=batch_size, now=now
                )
            total += deleted
            if deleted < batch_size:
                return total

    async def prune_events(
        self, older_than: timedelta, batch_size: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete events older than ``older_than`` (database clock), in bounded batches.

        ``now`` pins the clock (tests); by default age is measured from database now.
        """
        _base.check_older_than(older_than)
        total = 0
        while True:
            async with self._connection() as conn:
                deleted = await event_queries.AsyncQuerier(conn).event_prune(
                    older_than=older_than, batch_size=batch_size, now=now
                )
            total += deleted
            if deleted < batch_size:
                return total

    async def purge_finished_batch(
        self,
        state: JobState,
        older_than: timedelta,
        limit: int = 1000,
        *,
        now: datetime | None = None,
    ) -> int:
        """Delete up to ``limit`` jobs that finished in ``state`` more than ``older_than`` ago.

        One short transaction: the oldest such jobs go first, with their
        events; rows another transaction holds are skipped (SKIP LOCKED), and
        the effect ledger keeps its rows. ``state`` is a terminal state. Age is
        measured from database now, or from ``now`` when given (tests pin it).
        Returns how many jobs it deleted: fewer than ``limit`` means none is left.
        """
        _base.check_older_than(older_than)
        _base.check_batch_limit(limit)
        if state not in _base.FINISHED_STATES:
            raise ConfigurationError(f"only finished jobs are purged, not {state.value!r} ones")
        async with self._connection() as conn:
            return await job_queries.AsyncQuerier(conn).job_purge_state(
                state=models.JobState(state.value),
                older_than=older_than,
                batch_size=limit,
                now=now,
            )

    async def prune_events_batch(
        self, older_than: timedelta, limit: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete, of the ``limit`` oldest events, those older than ``older_than``.

        One short statement that walks the events in id order (no index on
        their time: every event would pay for one). Returns how many it
        deleted: fewer than ``limit`` means the oldest events left are young
        enough to keep (an old event behind a younger one waits for it).
        """
        _base.check_older_than(older_than)
        _base.check_batch_limit(limit)
        async with self._connection() as conn:
            return await event_queries.AsyncQuerier(conn).event_prune(
                older_than=older_than, batch_size=limit, now=now
            )

    async def prune_effects_batch(
        self, older_than: timedelta, limit: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete up to ``limit`` ledger rows older than ``older_than`` no job needs.

        One short statement (see :meth:`prune_effects` for why the ledger
        outlives its jobs). Returns how many it deleted: fewer than ``limit``
        means none is left.
        """
        _base.check_older_than(older_than)
        _base.check_batch_limit(limit)
        async with self._connection() as conn:
            return await effect_queries.AsyncQuerier(conn).effect_prune(
                older_than=older_than, batch_size=limit, now=now
            )

    async def prune_progress_batch(self, limit: int = 5000) -> int:
        """Delete up to ``limit`` progress reports of attempts that have ended; how many.

        A report lives while its job runs as the attempt that made it
        (:meth:`jobrun.registry.JobContext.progress`); after that nothing reads it.
        """
        _base.check_batch_limit(limit)
        async with self._connection() as conn:
            return await progress_queries.AsyncQuerier(conn).job_progress_prune(max_rows=limit)

    async def refresh_statistics(self) -> list[str]:
        """Analyze each of jobrun's growing tables that has outgrown its statistics.

        A table has outgrown them when it holds more than twice the rows (and
        a thousand more) it held when last analyzed. Every session plans a
        prepared statement once and keeps that plan; planned on a nearly empty
        table, the claim reads the whole table on every call once it is large,
        until new statistics make the sessions plan again. Autovacuum's
        analyze gets there within its naptime; this gets there on a server
        that runs without it, and sooner. A table someone else is vacuuming
        or analyzing right now (autovacuum) is skipped, not waited for, and
        left for the next call. Returns the tables analyzed.
        """
        async with self._connection() as conn:
            queries = system_queries.AsyncQuerier(conn)
            outgrown = await queries.tables_outgrowing_statistics()
            if not outgrown:
                return []
            for table in outgrown:
                await _ANALYZE[table](queries)
            # A skipped table still describes fewer rows than it holds.
            skipped = set(await queries.tables_outgrowing_statistics())
        return [table for table in outgrown if table not in skipped]


_ANALYZE = {
    "jobs": system_queries.AsyncQuerier.analyze_jobs,
    "job_events": system_queries.AsyncQuerier.analyze_job_events,
    "processed_effects": system_queries.AsyncQuerier.analyze_processed_effects,
}
"""The statement that analyzes each table TablesOutgrowingStatistics can name."""
