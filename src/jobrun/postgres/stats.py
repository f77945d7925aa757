"""The Store's methods for the charts and the overview: the roll-up of outcome events,
its reads, and the per-queue counts the overview reads from partial indexes."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobrun.domain import Histogram, JobState, OutcomeCounts, StatsPoint, TypeStats
from jobrun.postgres.convert import utc
from jobrun.postgres.store_core import StoreCore
from jobrun.sqlc import stats as stats_queries

__all__ = ["STATS_WIDTHS", "StatsMethods"]

STATS_WIDTHS = (1, 10, 60)
"""The widths, in minutes, of the steps the roll-up counts every outcome in."""


def _width(step: timedelta) -> int:
    minutes = step / timedelta(minutes=1)
    if minutes not in STATS_WIDTHS:
        raise ValueError(f"a step of the charts is 1, 10 or 60 minutes, got {step}")
    return int(minutes)


class StatsMethods(StoreCore):
    """The charts' rows (migration 00021), mixed into the Store.

    See :class:`jobrun.postgres.store.Store`.
    """

    async def stats_event_horizon(self) -> int:
        """The newest event id handed out so far (0 before the first)."""
        async with self._connection() as conn:
            return await stats_queries.AsyncQuerier(conn).stats_event_horizon() or 0

    async def stats_snapshot(self) -> str:
        """The database's current snapshot as text (``xmin:xmax:running,…``)."""
        async with self._connection() as conn:
            snapshot = await stats_queries.AsyncQuerier(conn).stats_snapshot()
        assert snapshot is not None, "pg_current_snapshot() is never null"
        return snapshot

    async def stats_settled(self, snapshot: str) -> bool:
        """Whether every transaction running when ``snapshot`` was taken has ended."""
        async with self._connection() as conn:
            return bool(await stats_queries.AsyncQuerier(conn).stats_settled(snapshot=snapshot))

    async def roll_up_stats(self, after: int, upto: int, max_events: int) -> tuple[int, int]:
        """Fold the events after ``after`` up to ``upto`` (at most ``max_events`` ids on)
        into job_stats, in one transaction; (the cursor after it, outcomes counted).

        Folds nothing, and returns the cursor where it is, when it is not at
        ``after``: another leader moved it.
        """
        async with self._connection() as conn:
            row = await stats_queries.AsyncQuerier(conn).stats_roll_up(
                after=after, upto=upto, max_events=max_events
            )
        assert row is not None, "the roll-up always answers one row"
        return row.last_event_id, row.counted if row.moved else 0

    async def stats_cursor(self) -> int:
        """The id of the last event the roll-up has folded."""
        async with self._connection() as conn:
            row = await stats_queries.AsyncQuerier(conn).stats_cursor()
        return row.last_event_id if row is not None else 0

    async def stats_unfolded_since(self) -> datetime | None:
        """When the oldest event not yet folded into the charts was written; None when the
        roll-up has folded every event."""
        async with self._connection() as conn:
            since = await stats_queries.AsyncQuerier(conn).stats_unfolded_since()
        return utc(since) if since is not None else None

    async def prune_stats_batch(self, width: int, older_than: timedelta, limit: int = 5000) -> int:
        """Delete up to ``limit`` of the charts' rows ``width`` minutes wide older than
        ``older_than``, oldest first."""
        async with self._connection() as conn:
            return await stats_queries.AsyncQuerier(conn).stats_prune(
                width=width, age=older_than, batch_size=limit
            )

    async def stats_series(
        self, since: datetime, step: timedelta, *, queue: str | None = None, type: str | None = None
    ) -> list[StatsPoint]:
        """One point per ``step`` (1, 10 or 60 minutes) since ``since`` that had any outcome,
        oldest first."""
        async with self._connection() as conn:
            rows = await stats_queries.AsyncQuerier(conn).stats_series(
                width=_width(step), since=since, queue=queue, type=type
            )
        return [
            StatsPoint(
                at=utc(row.at),
                outcomes=OutcomeCounts(row.succeeded, row.failed, row.dead, row.cancelled),
                wait=Histogram.of(row.wait_ms),
                run=Histogram.of(row.run_ms),
            )
            for row in rows
        ]

    async def stats_by_type(
        self, since: datetime, step: timedelta, *, queue: str | None = None
    ) -> list[TypeStats]:
        """Each queue's and type's outcomes, waits and run times in the steps of ``step``
        (1, 10 or 60 minutes) since ``since``."""
        async with self._connection() as conn:
            rows = await stats_queries.AsyncQuerier(conn).stats_breakdown(
                width=_width(step), since=since, queue=queue
            )
        return [
            TypeStats(
                queue=row.queue,
                type=row.type,
                outcomes=OutcomeCounts(row.succeeded, row.failed, row.dead, row.cancelled),
                wait=Histogram.of(row.wait_ms),
                run=Histogram.of(row.run_ms),
            )
            for row in rows
        ]

    async def outcomes_per_minute(
        self, since: datetime
    ) -> dict[str, dict[datetime, OutcomeCounts]]:
        """Attempts ended by outcome, per queue and minute since ``since`` (minutes with none
        are missing)."""
        async with self._connection() as conn:
            rows = await stats_queries.AsyncQuerier(conn).stats_outcomes_per_queue(since=since)
        per_queue: dict[str, dict[datetime, OutcomeCounts]] = {}
        for row in rows:
            per_queue.setdefault(row.queue, {})[utc(row.minute)] = OutcomeCounts(
                row.succeeded, row.failed, row.dead, row.cancelled
            )
        return per_queue

    async def parked_per_queue(self) -> dict[str, dict[JobState, int]]:
        """Per queue, its waiting, dead and cancelled jobs (the states missing have none),
        read from their partial indexes."""
        async with self._connection() as conn:
            rows = await stats_queries.AsyncQuerier(conn).stats_parked_per_queue()
        per_queue: dict[str, dict[JobState, int]] = {}
        for row in rows:
            per_queue.setdefault(row.queue, {})[JobState(row.state)] = row.count
        return per_queue
