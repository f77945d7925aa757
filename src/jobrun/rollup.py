"""The charts' roll-up: outcome events folded into rows of 1, 10 and 60 minute steps.

The dashboard's charts (throughput, failure rate, queue wait and run time)
read ``job_stats`` (migration 00021), never the jobs or their events: each
outcome is counted in a row of a 1, 10 and 60 minute step, so
every dashboard process draws the same picture and a restarted one has the
past as it was. :class:`Rollup` keeps those rows up to date: on each turn
(:meth:`Rollup.tick`, every :data:`DEFAULT_ROLLUP_EVERY` while the
maintenance service leads) it folds the events written since the last turn,
in batches of at most ``batch`` event ids, each one short transaction that
moves the stored cursor with the rows it adds.

Events are read in id order, and ids are handed out when a row is written,
not when its transaction commits: an event may become visible after one
with a higher id. Folding past it would lose it, so the roll-up only folds
up to a horizon it knows complete. It reads the newest id handed out, then
takes a snapshot; every event at or below that id was written by a
transaction that had ended or was running in that snapshot, so once those
running transactions have ended (in practice within milliseconds: the
claims and completions in flight), every such event that will ever be
visible is. Only the running transactions that hold a lock on
``job_events`` are waited for: an insert takes that lock before it draws
an id, so a transaction without it has no event at or below the horizon,
and a long transaction of the application's (or of another database on the
server) does not hold the charts back. A horizon not yet settled is kept
for the next turn.

The cursor's row is locked and checked in the folding statement itself, so
two leaders (one losing its lock while the next takes over) never fold the
same events twice. This module uses the ports only.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from jobrun._waiting import sleep_unless
from jobrun.ports import LockHandle, StatsRollup

__all__ = [
    "DEFAULT_ROLLUP_BATCH",
    "DEFAULT_ROLLUP_BUDGET",
    "DEFAULT_ROLLUP_EVERY",
    "STATS_KEPT",
    "Rollup",
]

DEFAULT_ROLLUP_EVERY = timedelta(seconds=10)
"""Time between two turns of the roll-up while leading: how far the charts trail."""

DEFAULT_ROLLUP_BATCH = 10_000
"""Event ids one folding transaction covers at most."""

DEFAULT_ROLLUP_BUDGET = timedelta(seconds=5)
"""How long one turn folds before it leaves the rest to the next (a backlog after an
upgrade, which counts the events already kept, takes several turns)."""

STATS_KEPT = {1: timedelta(days=1), 10: timedelta(days=2), 60: timedelta(days=8)}
"""How long the charts' rows of each width (minutes) are kept: a day of minutes (the
hour's chart and the overview), two days of ten-minute steps (the day's chart), and
eight days of hours (the week's chart, and a day more)."""

_SETTLE_CHECKS = 5
_SETTLE_PAUSE = 0.05


class Rollup:
    """Fold outcome events into the charts' rows, up to a horizon known complete."""

    def __init__(
        self,
        store: StatsRollup,
        *,
        batch: int = DEFAULT_ROLLUP_BATCH,
        budget: timedelta = DEFAULT_ROLLUP_BUDGET,
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        self._store = store
        self._batch = batch
        self._budget = budget.total_seconds()
        # The next horizon to fold to: (newest event id, the snapshot taken after it).
        self._pending: tuple[int, str] | None = None

    async def tick(
        self, stop: asyncio.Event | None = None, handle: LockHandle | None = None
    ) -> int:
        """One turn: fold up to the last settled horizon, take the next; outcomes counted.

        Ends early, leaving the rest for the next turn, when its time budget
        is spent, ``stop`` is set or ``handle`` is lost. Store errors are raised.
        """
        if self._pending is None:
            self._pending = await self._horizon()
        upto, snapshot = self._pending
        if not await self._settled(snapshot, stop, handle):
            return 0
        counted = 0
        cursor = await self._store.stats_cursor()
        deadline = time.monotonic() + self._budget
        while cursor < upto:
            cursor, folded = await self._store.roll_up_stats(cursor, upto, self._batch)
            counted += folded
            if _stopping(stop, handle) or time.monotonic() > deadline:
                return counted
        self._pending = await self._horizon()
        return counted

    async def catch_up(self, stop: asyncio.Event | None = None) -> int:
        """Fold every event written before the call (tests, operators); outcomes counted.

        Waits, between turns, for the transactions running at the call to end.
        """
        self._pending = await self._horizon()
        upto = self._pending[0]
        counted = 0
        while await self._store.stats_cursor() < upto:
            counted += await self.tick(stop)
            if stop is not None and stop.is_set():
                break
        return counted

    async def _horizon(self) -> tuple[int, str]:
        # In this order: the id first, then the snapshot (see the module's docstring).
        upto = await self._store.stats_event_horizon()
        return upto, await self._store.stats_snapshot()

    async def _settled(
        self, snapshot: str, stop: asyncio.Event | None, handle: LockHandle | None
    ) -> bool:
        for _ in range(_SETTLE_CHECKS):
            if await self._store.stats_settled(snapshot):
                return True
            if _stopping(stop, handle):
                return False
            await sleep_unless(stop, _SETTLE_PAUSE, handle)
        return False


def _stopping(stop: asyncio.Event | None, handle: LockHandle | None) -> bool:
    return (stop is not None and stop.is_set()) or (handle is not None and handle.lost)
