"""The ports of upkeep: retention, the charts' roll-up, and the reads of what it wrote.

Kept beside :mod:`jobrun.ports`, which re-exports every name here, so that
each stays one room. :class:`Pruning` deletes what retention says is old;
:class:`StatsRollup` folds outcome events into the charts' rows (migration
00021, :mod:`jobrun.rollup`); :class:`MaintenanceStore` is both, what the
maintenance leader needs; :class:`StatsReader` reads the charts' rows back,
with the per-queue counts the dashboard's overview takes from partial
indexes.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol, runtime_checkable
from uuid import UUID

from jobrun.domain import JobState, OutcomeCounts, StatsPoint, TypeStats

__all__ = ["MaintenanceStore", "Pruning", "StatsReader", "StatsRollup"]


@runtime_checkable
class StatsRollup(Protocol):
    """What the maintenance leader needs to roll outcome events into the charts' rows.

    The roll-up reads events in id order up to a horizon it knows complete:
    :meth:`stats_event_horizon`, then :meth:`stats_snapshot`; once
    :meth:`stats_settled` says that snapshot's transactions have all ended,
    every event at or below the horizon that will ever be visible is, and
    :meth:`roll_up_stats` may fold them.
    """

    async def stats_event_horizon(self) -> int:
        """The newest event id handed out so far (0 before the first)."""
        ...

    async def stats_snapshot(self) -> str:
        """The database's current snapshot, as text, taken after the horizon was read."""
        ...

    async def stats_settled(self, snapshot: str) -> bool:
        """Whether every transaction running when ``snapshot`` was taken has ended."""
        ...

    async def roll_up_stats(self, after: int, upto: int, max_events: int) -> tuple[int, int]:
        """Fold the events after ``after`` up to ``upto`` (at most ``max_events`` ids on)
        into the charts' rows; (the cursor after it, outcomes counted).

        Folds nothing when the cursor is not at ``after`` (another leader moved it).
        """
        ...

    async def stats_cursor(self) -> int:
        """The id of the last event the roll-up has folded."""
        ...

    async def prune_stats_batch(self, width: int, older_than: timedelta, limit: int = 5000) -> int:
        """Delete up to ``limit`` of the charts' rows ``width`` minutes wide older than
        ``older_than``."""
        ...


@runtime_checkable
class StatsReader(Protocol):
    """What the charts and the overview read: the rolled-up outcomes, waits and run times
    (migration 00021), and the per-queue counts of jobs outside the backlog."""

    async def stats_series(
        self, since: datetime, step: timedelta, *, queue: str | None = None, type: str | None = None
    ) -> list[StatsPoint]:
        """One point per ``step`` (1, 10 or 60 minutes) since ``since`` that had any outcome,
        oldest first."""
        ...

    async def stats_by_type(
        self, since: datetime, step: timedelta, *, queue: str | None = None
    ) -> list[TypeStats]:
        """Each queue's and type's outcomes, waits and run times in the steps of ``step``
        since ``since``."""
        ...

    async def outcomes_per_minute(
        self, since: datetime
    ) -> dict[str, dict[datetime, OutcomeCounts]]:
        """Attempts ended by outcome, per queue and minute since ``since``."""
        ...

    async def parked_per_queue(self) -> dict[str, dict[JobState, int]]:
        """Per queue, its waiting, dead and cancelled jobs, read from their partial indexes."""
        ...

    async def stats_unfolded_since(self) -> datetime | None:
        """When the oldest event not yet folded into the charts was written; None when the
        roll-up has folded every event (how far the charts trail)."""
        ...


@runtime_checkable
class Pruning(Protocol):
    """What the maintenance service needs: retention, one short bounded batch per call,
    and planner statistics kept in step with the tables' growth.

    Each pruning method deletes at most ``limit`` rows in one short transaction
    and returns how many it deleted (fewer than ``limit``: nothing old is
    left), so the caller decides how fast to go. Ages are measured from
    database now, or from ``now`` when given.
    """

    async def purge_finished_batch(
        self,
        state: JobState,
        older_than: timedelta,
        limit: int = 1000,
        *,
        now: datetime | None = None,
    ) -> int:
        """Delete up to ``limit`` jobs that finished in ``state`` more than ``older_than`` ago."""
        ...

    async def prune_events_batch(
        self, older_than: timedelta, limit: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete, of the ``limit`` oldest events by id, those older than ``older_than``."""
        ...

    async def prune_effects_batch(
        self, older_than: timedelta, limit: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete up to ``limit`` ledger rows older than ``older_than`` whose job is gone."""
        ...

    async def prune_progress_batch(self, limit: int = 5000) -> int:
        """Delete up to ``limit`` progress reports of attempts that have ended."""
        ...

    async def prune_workers(self, older_than: timedelta = timedelta(hours=1)) -> int:
        """Delete the rows of workers not heard from for ``older_than``."""
        ...

    async def settle_waiting(
        self, after: tuple[datetime, UUID] | None = None, batch_size: int = 1000
    ) -> tuple[int, tuple[datetime, UUID] | None]:
        """Queue or cancel a batch of waiting jobs whose dependencies ended; the next cursor."""
        ...

    async def settle_concurrency(self, batch_size: int = 1000) -> int:
        """Free the slots of keyed jobs that ended outside a completion, admit; how many."""
        ...

    async def refresh_statistics(self) -> list[str]:
        """Analyze the tables that outgrew their planner statistics; return their names."""
        ...


@runtime_checkable
class MaintenanceStore(Pruning, StatsRollup, Protocol):
    """What the maintenance leader needs: retention and the charts' roll-up."""
