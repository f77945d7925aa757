"""The state one dashboard app holds: its store, its options and its background pieces.

Everything goes through the ports (:class:`WebStore` is ``Admin`` plus
``ScheduleStore``), never SQL: the dashboard can only do what an operator
at the CLI can do, and the store keeps every decision.

Mounted under another app, Starlette runs no sub-app lifespan, so every
background piece (opening a :class:`~jobrun.Client`, the LISTEN connection)
starts lazily on first use, and :meth:`Dashboard.close` stops them all.

The overview's throughput lines, like the Charts page, read the 1-minute
rows the maintenance leader rolls up (:mod:`jobrun.rollup`): every
dashboard process shows the same, and a restarted one the past hour.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Protocol, cast

from jobrun.client import Client
from jobrun.domain import SEARCH_ROWS, JobState
from jobrun.errors import JobrunError
from jobrun.ports import Admin, ScheduleStore, StatsReader
from jobrun.postgres import Notifier
from jobrun.web.stats_view import per_minute_points

__all__ = ["THROUGHPUT_MINUTES", "Dashboard", "WebStore"]

THROUGHPUT_MINUTES = 60
"""Minutes of finished jobs the overview's line of each queue shows."""


class WebStore(Admin, ScheduleStore, StatsReader, Protocol):
    """What the dashboard needs from storage: the admin, schedule and charts' ports."""


class Dashboard:
    """The state one app holds: its store source, options and background pieces."""

    def __init__(
        self,
        source: Client | WebStore,
        *,
        read_only: bool,
        database_url: str | None,
        notify_channel: str | None,
        poll: float,
        search_rows: int = SEARCH_ROWS,
    ) -> None:
        self.source = source
        self.search_rows = search_rows
        """The most jobs one search of the jobs page or API examines before it says so."""
        self.read_only = read_only
        # Where live updates LISTEN; a Client falls back on its own URL and channel.
        self.database_url, self.notify_channel = database_url, notify_channel
        self.poll = poll
        self._opened_client = False
        self._start_lock = asyncio.Lock()
        self._notifier: Notifier | None = None
        self._notifier_failed = False
        self.replica_note: str | None = None
        """What the last read from a replica said of its lag; None when reads go to the primary."""

    async def store(self) -> WebStore:
        """The store, opening the client (once) when the app was given a closed one."""
        if isinstance(self.source, Client):
            if self.source._store is None:
                async with self._start_lock:
                    if self.source._store is None:
                        await self.source.open()
                        self._opened_client = True
            store = cast(WebStore, self.source.store)
        else:
            store = self.source
        return store

    async def reader(self) -> WebStore:
        """Where the pages read: the replica (``read_url``) if the client has one, else the store.

        Reading a replica also refreshes its note of the lag, which every page
        shows, so what is on screen is never taken for the primary's present.
        Actions always go through :meth:`store`, to the primary.
        """
        store = await self.store()
        if not isinstance(self.source, Client) or self.source.config.read_url is None:
            return store
        reader = self.source.reader
        lag = await reader.replica_lag()
        self.replica_note = (
            lag.describe() if lag is not None else "read from read_url, which is a primary"
        )
        return cast(WebStore, reader)

    async def notifier(self) -> Notifier | None:
        """The LISTEN connection, started on the first live stream; None without a database URL."""
        if self._notifier is not None or self._notifier_failed:
            return self._notifier
        url, channel = self.database_url, self.notify_channel
        if isinstance(self.source, Client):
            await self.store()
            # None behind PgBouncer without a direct URL: poll only.
            url = url or self.source.listen_url
            channel = channel or self.source.store.notify_channel
        if url is None:
            self._notifier_failed = True
            return None
        async with self._start_lock:
            if self._notifier is None:
                try:
                    self._notifier = await Notifier.start(
                        url, channel or "jobrun", application_name="jobrun-web"
                    )
                except JobrunError:
                    # Live updates fall back to polling; the pages still work.
                    self._notifier_failed = True
        return self._notifier

    async def close(self) -> None:
        """Stop the notifier; close the client if this app opened it."""
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            await notifier.close()
        if self._opened_client and isinstance(self.source, Client):
            await self.source.close()
            self._opened_client = False

    async def overview_data(self) -> list[dict[str, Any]]:
        """One row per queue: its counts by state, lag, pause and last hour's outcomes.

        Every count is read from a partial index (the backlog, the running,
        waiting, dead and cancelled jobs) or from the charts' 1-minute rows
        (what succeeded in the last hour, and the line of finished jobs), so
        the work follows those jobs, never the succeeded history that is most
        of a busy table. A queue is listed when it has any of those, or a row
        of controls.
        """
        store = await self.reader()
        stats = {s.queue: s for s in await store.queue_stats()}
        queues = {q.name: q for q in await store.list_queues()}
        parked = await store.parked_per_queue()
        now = await store.now()
        outcomes = await store.outcomes_per_minute(now - timedelta(minutes=THROUGHPUT_MINUTES - 1))
        rows = []
        for name in sorted(set(stats) | set(queues) | set(parked) | set(outcomes)):
            s, q = stats.get(name), queues.get(name)
            counts = parked.get(name, {})
            minutes = outcomes.get(name, {})
            finished = {at: o.succeeded + o.dead + o.cancelled for at, o in minutes.items()}
            rows.append(
                {
                    "queue": name,
                    "queued": s.queued if s else 0,
                    "due": s.due if s else 0,
                    "leased": s.leased if s else 0,
                    "waiting": counts.get(JobState.WAITING, 0),
                    "succeeded_last_hour": sum(o.succeeded for o in minutes.values()),
                    "dead": counts.get(JobState.DEAD, 0),
                    "cancelled": counts.get(JobState.CANCELLED, 0),
                    "lag_seconds": s.lag.total_seconds() if s else 0.0,
                    "paused": q.paused if q else False,
                    "throughput": per_minute_points(finished, now, THROUGHPUT_MINUTES),
                }
            )
        return rows
