"""The detector on PostgreSQL: its rows in its own tables, its jobs in jobrun.

This is the only module of the detector that talks to PostgreSQL, through the
queries generated from ``db/query/*.sql`` into :mod:`detector.sqlc`. It imports
psycopg because it is an application with tables of its own (jobrun's import
contract keeps psycopg inside ``jobrun.postgres``; it does not reach the
applications built on it).

How jobrun carries the guarantees:

- ingest inserts the event and enqueues its detection job through
  ``store.enqueue(..., conn=conn)``: one transaction, so an event never lacks
  its job and a job never lacks its event;
- the detection handler declares the shared key with ``ctx.lock(key)`` and
  returns a commit callback; jobrun takes the key's advisory lock in its
  completion transaction and runs the callback there, so the count, the
  decision, the delivery intent and the delivery jobs commit with the job's
  completion, once;
- delivery jobs allocate a revision in a short transaction of their own and
  sign outside it, never under a detector key lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from detector.domain import (
    DigestConflict,
    EventIn,
    IngestResult,
    StoredEvent,
    event_digest,
    rule_for,
    shared_key,
    snapshot_bytes,
)
from detector.port import Abandoned, Faults, Snapshot, apply_event, deliver_agent
from detector.sending import post_snapshot
from detector.signing import Signer
from detector.sqlc import delivery as delivery_q
from detector.sqlc import detection as detection_q
from detector.sqlc import events as events_q
from detector.sqlc.models import DetectorEvent
from jobrun import Client, NewJob
from jobrun.domain import Backoff, BackoffKind
from jobrun.postgres import Pool, migrate
from jobrun.registry import Cancel, JobContext, Registry, Snooze

__all__ = [
    "DELIVER",
    "DETECT",
    "MIGRATIONS",
    "QUEUES",
    "PgDetector",
    "build_registry",
    "migrate_detector",
    "now_ms",
]

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
"""The detector's goose migrations (versions 1001 and up, beside jobrun's)."""
DETECT = "detector.detect"
"""The job type that counts one event."""
DELIVER = "detector.deliver"
"""The job type that brings one agent up to date."""
QUEUES = ["detector", "delivery"]
"""The queues of the detector's jobs."""
_DETECT_BACKOFF = Backoff(kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=50))
_DELIVER_BACKOFF = Backoff(base=timedelta(milliseconds=200), max=timedelta(seconds=30))
_AGENT_BUSY = timedelta(milliseconds=100)


def now_ms() -> int:
    """The service clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


async def migrate_detector(pool: Pool) -> list[int]:
    """Apply jobrun's migrations, then the detector's; return the versions applied."""
    return [*await migrate(pool), *await migrate(pool, source=MIGRATIONS)]


def _stored(row: DetectorEvent) -> StoredEvent:
    return StoredEvent(
        id=row.id,
        node_id=row.node_id,
        request_id=row.request_id,
        site=row.site,
        address=row.address,
        rule_version=row.rule_version,
        occurred_ms=row.occurred_ms,
        received_ms=row.received_ms,
        digest=row.digest,
    )


def _detect_job(event_id: int) -> NewJob:
    return NewJob(
        type=DETECT,
        queue="detector",
        payload={"event_id": event_id},
        backoff=_DETECT_BACKOFF,
        max_attempts=50,
    )


def _deliver_job(agent_id: str, key: str | None) -> NewJob:
    return NewJob(
        type=DELIVER,
        queue="delivery",
        payload={"agent_id": agent_id},
        backoff=_DELIVER_BACKOFF,
        max_attempts=100,
        idempotency_key=key,
    )


class _DetectionTx:
    """:class:`~detector.port.DetectionTx` on the completion transaction's connection."""

    def __init__(self, conn: psycopg.AsyncConnection[Any], app: PgDetector) -> None:
        self._conn = conn
        self._app = app
        self._q = detection_q.AsyncQuerier(conn)

    async def hit_insert(self, event: StoredEvent, key: str) -> bool:
        found = await self._q.hit_insert(event_id=event.id, key=key, occurred_ms=event.occurred_ms)
        return found is not None

    async def counter_get(self, key: str) -> int:
        return await self._q.counter_get(key=key) or 0

    async def counter_set(self, key: str, hits: int) -> None:
        await self._q.counter_set(key=key, hits=hits)

    async def window_max(self, key: str, occurred_ms: int, window_ms: int) -> int:
        found = await self._q.hit_window_max(window_ms=window_ms, key=key, occurred_ms=occurred_ms)
        return found or 0

    async def decision_active(self, event: StoredEvent, at_ms: int) -> bool:
        row = await self._q.decision_active(
            site=event.site, address=event.address, rule_version=event.rule_version, at_ms=at_ms
        )
        return row is not None

    async def decide(self, event: StoredEvent, expires_ms: int) -> None:
        decision_id = await self._q.decision_insert(
            params=detection_q.DecisionInsertParams(
                site=event.site,
                address=event.address,
                rule_version=event.rule_version,
                event_id=event.id,
                decided_ms=event.occurred_ms,
                expires_ms=expires_ms,
            )
        )
        assert decision_id is not None
        intents = await delivery_q.AsyncQuerier(self._conn).intent_insert_for_all(
            decision_id=decision_id, created_ms=self._app.clock()
        )
        store = self._app.client.store
        for intent in intents:
            key = f"deliver:{intent.agent_id}:{intent.id}"
            await store.enqueue(_deliver_job(intent.agent_id, key), conn=self._conn)


class _Delivery:
    """:class:`~detector.port.DeliveryStore` on the pool, one transaction per method."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def pending_snapshot(self, agent_id: str) -> tuple[Snapshot | None, bool]:
        async with self._pool.connection() as conn:
            q = delivery_q.AsyncQuerier(conn)
            row = await q.snapshot_pending(agent_id=agent_id)
            uncovered = await q.intent_uncovered_count(agent_id=agent_id) or 0
        snapshot = None
        if row is not None:
            snapshot = Snapshot(row.agent_id, row.revision, row.body, row.signature, row.created_ms)
        return snapshot, uncovered > 0

    async def allocate_snapshot(self, agent_id: str, now: int) -> Snapshot:
        async with self._pool.connection() as conn, conn.transaction():
            q = delivery_q.AsyncQuerier(conn)
            revision = await q.agent_revision_next(agent_id=agent_id)
            if revision is None:
                raise Cancel(f"agent {agent_id!r} is not registered")
            await q.snapshot_supersede(agent_id=agent_id)
            # Cover the intents *before* reading the decisions. Each statement of
            # a READ COMMITTED transaction sees what is committed when it starts:
            # covering last would also cover an intent whose decision committed
            # after the read, marking it delivered in bytes that lack it. Read
            # after, every covered intent's decision (same commit) is seen.
            await q.intent_cover(revision=revision, agent_id=agent_id)
            decisions = await detection_q.AsyncQuerier(conn).decisions_in_force(at_ms=now)
            body = snapshot_bytes(
                agent_id,
                revision,
                now,
                [
                    {
                        "site": d.site,
                        "address": d.address,
                        "rule_version": d.rule_version,
                        "expires_ms": d.expires_ms,
                    }
                    for d in decisions
                ],
            )
            await q.snapshot_insert(agent_id=agent_id, revision=revision, body=body, created_ms=now)
        return Snapshot(agent_id, revision, body, None, now)

    async def sign_snapshot(self, snapshot: Snapshot, signature: bytes) -> None:
        async with self._pool.connection() as conn:
            await delivery_q.AsyncQuerier(conn).snapshot_sign(
                signature=signature, agent_id=snapshot.agent_id, revision=snapshot.revision
            )

    async def mark_delivered(self, snapshot: Snapshot, now: int) -> None:
        async with self._pool.connection() as conn:
            await delivery_q.AsyncQuerier(conn).snapshot_delivered(
                delivered_ms=now, agent_id=snapshot.agent_id, revision=snapshot.revision
            )


def build_registry(app: PgDetector, *, naive: bool = False) -> Registry:
    """The detector's handlers, bound to ``app``.

    ``naive=True`` registers the negative control instead of the real
    detection: it reads the counter when the handler runs, outside any lock,
    and writes that value plus one at commit, the read-modify-write of the
    spec's exercise. Only the race test uses it, to show that it loses
    increments under concurrency and that the test can therefore fail.
    """
    registry = Registry()

    @registry.handler(DETECT)
    async def detect(ctx: JobContext, payload: Any) -> Any:
        event = await app.event(int(payload["event_id"]))
        if event is None:
            raise Cancel(f"event {payload['event_id']} does not exist")
        key = shared_key(event.site, event.address, rule_for(event.rule_version))
        if naive:
            return await _naive(app, event, key)
        ctx.lock(key)

        async def commit(conn: psycopg.AsyncConnection[Any]) -> None:
            await apply_event(_DetectionTx(conn, app), event, app.faults)

        return commit

    @registry.handler(DELIVER)
    async def deliver(ctx: JobContext, payload: Any) -> None:
        agent_id = str(payload["agent_id"])
        async with app.pool.connection() as conn:
            agent = await delivery_q.AsyncQuerier(conn).agent_get(agent_id=agent_id)
        if agent is None:
            raise Cancel(f"agent {agent_id!r} is not registered")

        async def send(_agent: str, snapshot: Snapshot) -> int:
            status: int = await app.send(agent.endpoint, snapshot)
            return status

        # One delivery per agent at a time, so an agent sees its revisions in
        # increasing order: two concurrent jobs could otherwise send revision 2
        # before revision 1. The lock is a transaction-scoped advisory lock on a
        # connection of its own (released by the rollback even if this handler
        # dies); a busy agent snoozes this job, which then finds whatever the
        # holder did not cover. No detector key lock is held meanwhile.
        async with app.pool.connection() as lock_conn, lock_conn.transaction():
            taken = await delivery_q.AsyncQuerier(lock_conn).agent_delivery_try_lock(
                agent_id=agent_id
            )
            if not taken:
                raise Snooze(_AGENT_BUSY)
            try:
                await deliver_agent(
                    _Delivery(app.pool),
                    agent_id,
                    sign=app.signer.sign,
                    send=send,
                    now_ms=app.clock(),
                    faults=app.faults,
                )
            except Abandoned as exc:
                raise Cancel(str(exc)) from exc

    return registry


async def _naive(app: PgDetector, event: StoredEvent, key: str) -> Any:
    async with app.pool.connection() as conn:
        seen = await detection_q.AsyncQuerier(conn).counter_get(key=key) or 0
    await asyncio.sleep(0.02)  # the handler "thinks" between its read and its write

    async def commit(conn: psycopg.AsyncConnection[Any]) -> None:
        q = detection_q.AsyncQuerier(conn)
        if (
            await q.hit_insert(event_id=event.id, key=key, occurred_ms=event.occurred_ms)
            is not None
        ):
            await q.counter_set(key=key, hits=seen + 1)

    return commit


Send = Callable[[str, Snapshot], Any]


class PgDetector:
    """The detector store on PostgreSQL (a :class:`~detector.port.DetectorStore`).

    It owns a jobrun :class:`~jobrun.Client` whose registry holds the
    detector's handlers; :meth:`process` runs a worker in this process until
    no detector job is left. Worker processes use :func:`run_worker_process`.
    """

    def __init__(
        self,
        database_url: str,
        *,
        signer: Signer,
        send: Send = post_snapshot,
        clock: Callable[[], int] = now_ms,
        naive: bool = False,
        concurrency: int = 8,
        faults: Faults | None = None,
    ) -> None:
        self.faults = faults if faults is not None else Faults()
        """Crashes to inject (tests)."""
        self.signer = signer
        """Signs snapshots."""
        self.send = send
        """Posts a snapshot to an endpoint; returns the HTTP status."""
        self.clock = clock
        """The service clock (epoch ms)."""
        self.client = Client(
            build_registry(self, naive=naive),
            database_url=database_url,
            queues=QUEUES,
            concurrency=concurrency,
            poll=timedelta(milliseconds=200),
            reap_every=timedelta(seconds=1),
        )
        """The jobrun client: pool, store and workers."""

    async def open(self) -> PgDetector:
        """Open the pool and apply pending migrations (jobrun's and the detector's)."""
        await self.client.open()
        await migrate_detector(self.client.pool)
        return self

    async def close(self) -> None:
        """Close the pool."""
        await self.client.close()

    async def __aenter__(self) -> PgDetector:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pool(self) -> Pool:
        """The connection pool."""
        return self.client.pool

    async def event(self, event_id: int) -> StoredEvent | None:
        """The stored event ``event_id``, if any."""
        async with self.pool.connection() as conn:
            row = await events_q.AsyncQuerier(conn).event_get(id=event_id)
        return None if row is None else _stored(row)

    async def ingest(self, node_id: str, event: EventIn, *, now_ms: int) -> IngestResult:
        """Store the event and enqueue its detection job in one transaction, or find its replay."""
        digest = event_digest(node_id, event)
        async with self.pool.connection() as conn, conn.transaction():
            q = events_q.AsyncQuerier(conn)
            event_id = await q.event_insert(
                params=events_q.EventInsertParams(
                    node_id=node_id,
                    request_id=event.request_id,
                    site=event.site,
                    address=event.address,
                    rule_version=event.rule_version,
                    occurred_ms=event.occurred_ms,
                    received_ms=now_ms,
                    digest=digest,
                )
            )
            if event_id is not None:
                await self.client.store.enqueue(_detect_job(event_id), conn=conn)
                return IngestResult(event_id, digest, replay=False)
            stored = await q.event_by_replay_key(node_id=node_id, request_id=event.request_id)
        assert stored is not None
        if stored.digest != digest:
            raise DigestConflict(node_id, event.request_id)
        return IngestResult(stored.id, stored.digest, replay=True)

    async def add_agent(self, agent_id: str, endpoint: str) -> None:
        """Register (or update) an agent."""
        async with self.pool.connection() as conn:
            await delivery_q.AsyncQuerier(conn).agent_upsert(agent_id=agent_id, endpoint=endpoint)

    async def redeliver(self, event_id: int) -> None:
        """Enqueue a second detection job for ``event_id`` (a duplicate delivery)."""
        await self.client.store.enqueue(_detect_job(event_id))

    async def scan(self) -> int:
        """Enqueue a delivery job for every agent with intent or a snapshot not yet delivered.

        The durable scan that repairs what no notification will: it reads the
        rows, not any message. A redundant job finds nothing to do.
        """
        async with self.pool.connection() as conn:
            agents = await delivery_q.AsyncQuerier(conn).agents_with_pending_work()
        for agent_id in agents:
            await self.client.store.enqueue(_deliver_job(agent_id, None))
        return len(agents)

    async def pending_jobs(self) -> int:
        """Detector jobs queued or running (retries waiting out their backoff included)."""
        depth = await self.client.store.depth()
        return sum(d.count for d in depth if d.queue in QUEUES and d.state in ("queued", "leased"))

    async def process(self, *, within: float = 30.0) -> None:
        """Run a worker here until no detector job is left (TimeoutError after ``within`` s)."""
        async with asyncio.timeout(within):
            while True:
                await self.client.run_worker(drain=True)
                if not await self.pending_jobs():
                    return
                await asyncio.sleep(0.05)

    async def state(self) -> dict[str, Any]:
        """Every detector table as plain data keyed by what both stores share."""
        async with self.pool.connection() as conn:
            events = await events_q.AsyncQuerier(conn).event_list()
            dq = detection_q.AsyncQuerier(conn)
            counters = await dq.counter_list()
            decisions = await dq.decision_list()
            lq = delivery_q.AsyncQuerier(conn)
            intents = await lq.intent_list()
            snapshots = await lq.snapshot_list()
        by_id = {e.id: (e.node_id, e.request_id) for e in events}
        targets = {d.id: (d.site, d.address, d.rule_version, d.expires_ms) for d in decisions}
        return {
            "events": [(e.node_id, e.request_id, e.digest, e.occurred_ms) for e in events],
            "counters": {c.key: c.hits for c in counters},
            "decisions": [
                (d.site, d.address, d.rule_version, by_id[d.event_id], d.decided_ms, d.expires_ms)
                for d in decisions
            ],
            "intents": sorted((i.agent_id, i.snapshot_revision is not None) for i in intents),
            "coverage": sorted(
                (i.agent_id, i.snapshot_revision, targets[i.decision_id])
                for i in intents
                if i.snapshot_revision is not None
            ),
            "snapshots": [
                (s.agent_id, s.revision, s.signature is not None, s.delivered_ms is not None)
                for s in snapshots
            ],
            "snapshot_bodies": {(s.agent_id, s.revision): bytes(s.body) for s in snapshots},
        }


async def run_worker_process(
    database_url: str, *, naive: bool = False, concurrency: int = 8
) -> None:
    """Run one detector worker until SIGTERM/SIGINT (``python -m detector worker``)."""
    signer = Signer(os.environ["DETECTOR_SIGNING_KEY"])
    async with PgDetector(database_url, signer=signer, naive=naive, concurrency=concurrency) as app:
        print("ready", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await app.client.run_worker(handle_signals=True)
