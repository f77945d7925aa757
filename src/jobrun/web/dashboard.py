"""The state one dashboard app holds: its store, its options and its background pieces.

Everything goes through the ports (:class:`WebStore` is ``Admin`` plus
``ScheduleStore``), never SQL: the dashboard can only do what an operator
at the CLI can do, and the store keeps every decision.

Mounted under another app, Starlette runs no sub-app lifespan, so every
background piece (opening a :class:`~jobrun.Client`, the throughput sampler,
the LISTEN connection) starts lazily on first use, and :meth:`Dashboard.close`
stops them all.

Throughput has no table of its own: the sampler reads the per-state counts
every ``sample_every`` seconds and keeps the last minutes of finished-job
deltas (:class:`Throughput`) for the overview's chart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any, Protocol, cast

from jobrun.client import Client
from jobrun.domain import SEARCH_ROWS, JobState
from jobrun.errors import JobrunError
from jobrun.ports import Admin, ScheduleStore
from jobrun.postgres import Notifier

__all__ = ["Dashboard", "Throughput", "WebStore"]

FINISHED = (JobState.SUCCEEDED, JobState.DEAD)


class WebStore(Admin, ScheduleStore, Protocol):
    """What the dashboard needs from storage: the admin and schedule ports."""


class Throughput:
    """Finished jobs per sample interval and queue, for the last ``keep`` samples."""

    def __init__(self, keep: int = 60) -> None:
        self.keep = keep
        self.totals: dict[str, int] = {}
        self.series: dict[str, deque[int]] = {}

    def add(self, finished_by_queue: dict[str, int]) -> None:
        """Record one sample: each queue's total of finished jobs now."""
        for queue, total in finished_by_queue.items():
            previous = self.totals.get(queue)
            series = self.series.setdefault(queue, deque([0] * self.keep, maxlen=self.keep))
            # A purge makes the total fall: count that sample as zero, not negative.
            series.append(0 if previous is None else max(0, total - previous))
            self.totals[queue] = total

    def points(self, queue: str) -> list[int]:
        """The last ``keep`` deltas of ``queue``, oldest first (zeros before it was seen)."""
        return list(self.series.get(queue, [0] * self.keep))


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
        sample_every: float,
        search_rows: int = SEARCH_ROWS,
    ) -> None:
        self.source = source
        self.search_rows = search_rows
        """The most jobs one search of the jobs page or API examines before it says so."""
        self.read_only = read_only
        # Where live updates LISTEN; a Client falls back on its own URL and channel.
        self.database_url, self.notify_channel = database_url, notify_channel
        self.poll, self.sample_every = poll, sample_every
        self.throughput = Throughput()
        self._opened_client = False
        self._start_lock = asyncio.Lock()
        self._sampler: asyncio.Task[None] | None = None
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
        if self._sampler is None:
            self._sampler = asyncio.create_task(self._sample(), name="jobrun-web-sampler")
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

    async def _sample(self) -> None:
        while True:
            if isinstance(self.source, Client) and self.source._store is None:
                return  # the client was closed under us: nothing left to sample
            with contextlib.suppress(Exception):
                store = await self.reader()
                finished: dict[str, int] = {}
                for row in await store.depth():
                    finished.setdefault(row.queue, 0)
                    if row.state in FINISHED:
                        finished[row.queue] += row.count
                self.throughput.add(finished)
            await asyncio.sleep(self.sample_every)

    async def close(self) -> None:
        """Stop the sampler and the notifier; close the client if this app opened it."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.cancel()
            await asyncio.wait([sampler])  # it ends cancelled: nothing of its own to raise
        notifier, self._notifier = self._notifier, None
        if notifier is not None:
            await notifier.close()
        if self._opened_client and isinstance(self.source, Client):
            await self.source.close()
            self._opened_client = False

    async def overview_data(self) -> list[dict[str, Any]]:
        """One row per queue: its counts by state, lag, pause and throughput series."""
        store = await self.reader()
        stats = {s.queue: s for s in await store.queue_stats()}
        queues = {q.name: q for q in await store.list_queues()}
        depth: dict[str, dict[str, int]] = {}
        for row in await store.depth():
            depth.setdefault(row.queue, {})[row.state.value] = row.count
        rows = []
        for name in sorted(set(stats) | set(queues) | set(depth)):
            s, q = stats.get(name), queues.get(name)
            counts = depth.get(name, {})
            rows.append(
                {
                    "queue": name,
                    "queued": s.queued if s else counts.get("queued", 0),
                    "due": s.due if s else 0,
                    "leased": s.leased if s else counts.get("leased", 0),
                    "succeeded": counts.get("succeeded", 0),
                    "dead": counts.get("dead", 0),
                    "cancelled": counts.get("cancelled", 0),
                    "lag_seconds": s.lag.total_seconds() if s else 0.0,
                    "paused": q.paused if q else False,
                    "throughput": self.throughput.points(name),
                }
            )
        return rows
