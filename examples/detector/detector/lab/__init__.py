"""The SQLite laboratory: the detector on one file, one process, inspectable with ``sqlite3``.

It is the behaviour PostgreSQL must preserve, so it implements the same port
(:class:`~detector.port.DetectorStore`) with the same rules
(:func:`~detector.port.apply_event`, :func:`~detector.port.deliver_agent`).
Its durable jobs are rows of its own ``lab_jobs`` table, inserted in the same
transaction as the event (or the decision) that causes them and marked done
in the transaction that commits their effect. One process runs them one at a
time, so the lab needs no key lock: that is exactly what stops being true on
PostgreSQL with several workers.

The schema and the queries are ``schema.sql`` and ``queries.sql`` beside this
module (SQL lives in .sql files only).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from detector.domain import DigestConflict, EventIn, IngestResult, StoredEvent, event_digest
from detector.domain import snapshot_bytes as _snapshot_bytes
from detector.port import Abandoned, Faults, Snapshot, apply_event, deliver_agent
from detector.sending import post_snapshot
from detector.signing import Signer

__all__ = ["LabDetector", "load_queries", "open_lab"]

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
MAX_ATTEMPTS = 50
"""A lab job that fails this many times is left for an operator."""


def load_queries() -> dict[str, str]:
    """The lab's queries by name, parsed from ``queries.sql``."""
    text = importlib.resources.files(__name__).joinpath("queries.sql").read_text("utf-8")
    parts = _NAME.split(text)
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


Q = load_queries()


def open_lab(path: str | Path) -> sqlite3.Connection:
    """Open (creating when new) a lab database; transactions are explicit (BEGIN IMMEDIATE)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.row_factory = sqlite3.Row
    schema = importlib.resources.files(__name__).joinpath("schema.sql").read_text("utf-8")
    conn.executescript(schema)
    return conn


@contextlib.contextmanager
def _tx(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _event(row: sqlite3.Row) -> StoredEvent:
    return StoredEvent(**{k: row[k] for k in row.keys()})  # noqa: SIM118


class _DetectionTx:
    def __init__(self, conn: sqlite3.Connection, clock: Callable[[], int]) -> None:
        self._conn = conn
        self._clock = clock

    async def hit_insert(self, event: StoredEvent, key: str) -> bool:
        cur = self._conn.execute(
            Q["hit_insert"], {"event_id": event.id, "key": key, "occurred_ms": event.occurred_ms}
        )
        return cur.rowcount > 0

    async def counter_get(self, key: str) -> int:
        row = self._conn.execute(Q["counter_get"], {"key": key}).fetchone()
        return 0 if row is None else int(row[0])

    async def counter_set(self, key: str, hits: int) -> None:
        self._conn.execute(Q["counter_set"], {"key": key, "hits": hits})

    async def window_max(self, key: str, occurred_ms: int, window_ms: int) -> int:
        params = {"key": key, "occurred_ms": occurred_ms, "window_ms": window_ms}
        return int(self._conn.execute(Q["hit_window_max"], params).fetchone()[0])

    async def decision_active(self, event: StoredEvent, at_ms: int) -> bool:
        params = {
            "site": event.site,
            "address": event.address,
            "rule_version": event.rule_version,
            "at_ms": at_ms,
        }
        return self._conn.execute(Q["decision_active"], params).fetchone() is not None

    async def decide(self, event: StoredEvent, expires_ms: int) -> None:
        params = {
            "site": event.site,
            "address": event.address,
            "rule_version": event.rule_version,
            "event_id": event.id,
            "decided_ms": event.occurred_ms,
            "expires_ms": expires_ms,
        }
        decision_id = self._conn.execute(Q["decision_insert"], params).fetchone()[0]
        intents = self._conn.execute(
            Q["intent_insert_for_all"], {"decision_id": decision_id, "created_ms": self._clock()}
        ).fetchall()
        for intent in intents:
            self._conn.execute(Q["job_insert"], {"kind": "deliver", "ref": intent["agent_id"]})


class _Delivery:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def pending_snapshot(self, agent_id: str) -> tuple[Snapshot | None, bool]:
        row = self._conn.execute(Q["snapshot_pending"], {"agent_id": agent_id}).fetchone()
        uncovered = self._conn.execute(
            Q["intent_uncovered_count"], {"agent_id": agent_id}
        ).fetchone()[0]
        snapshot = None
        if row is not None:
            snapshot = Snapshot(
                row["agent_id"], row["revision"], row["body"], row["signature"], row["created_ms"]
            )
        return snapshot, uncovered > 0

    async def allocate_snapshot(self, agent_id: str, now_ms: int) -> Snapshot:
        with _tx(self._conn) as conn:
            revision = conn.execute(Q["agent_revision_next"], {"agent_id": agent_id}).fetchone()[0]
            conn.execute(Q["snapshot_supersede"], {"agent_id": agent_id})
            # Same order as on PostgreSQL: cover the intents, then read the decisions.
            conn.execute(Q["intent_cover"], {"revision": revision, "agent_id": agent_id})
            decisions = conn.execute(Q["decisions_in_force"], {"at_ms": now_ms}).fetchall()
            body = _snapshot_bytes(
                agent_id,
                revision,
                now_ms,
                [
                    {
                        "site": d["site"],
                        "address": d["address"],
                        "rule_version": d["rule_version"],
                        "expires_ms": d["expires_ms"],
                    }
                    for d in decisions
                ],
            )
            conn.execute(
                Q["snapshot_insert"],
                {"agent_id": agent_id, "revision": revision, "body": body, "created_ms": now_ms},
            )
        return Snapshot(agent_id, revision, body, None, now_ms)

    async def sign_snapshot(self, snapshot: Snapshot, signature: bytes) -> None:
        self._conn.execute(
            Q["snapshot_sign"],
            {"signature": signature, "agent_id": snapshot.agent_id, "revision": snapshot.revision},
        )

    async def mark_delivered(self, snapshot: Snapshot, now_ms: int) -> None:
        self._conn.execute(
            Q["snapshot_delivered"],
            {"delivered_ms": now_ms, "agent_id": snapshot.agent_id, "revision": snapshot.revision},
        )


Send = Callable[[str, Snapshot], Any]


class LabDetector:
    """The detector store on SQLite (a :class:`~detector.port.DetectorStore`)."""

    def __init__(
        self,
        path: str | Path,
        *,
        signer: Signer,
        send: Send = post_snapshot,
        clock: Callable[[], int],
        faults: Faults | None = None,
    ) -> None:
        self.conn = open_lab(path)
        """The lab's one connection."""
        self.signer = signer
        """Signs snapshots."""
        self.send = send
        """Posts a snapshot to an endpoint; returns the HTTP status."""
        self.clock = clock
        """The service clock (epoch ms)."""
        self.faults = faults if faults is not None else Faults()
        """Crashes to inject (tests)."""

    async def open(self) -> LabDetector:
        """Nothing to open beyond the file; for symmetry with PostgreSQL."""
        return self

    async def close(self) -> None:
        """Close the database file."""
        self.conn.close()

    async def __aenter__(self) -> LabDetector:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def ingest(self, node_id: str, event: EventIn, *, now_ms: int) -> IngestResult:
        """Store the event and its detection job in one transaction, or find its replay."""
        digest = event_digest(node_id, event)
        params = {"node_id": node_id, **event.model_dump(), "received_ms": now_ms, "digest": digest}
        with _tx(self.conn) as conn:
            row = conn.execute(Q["event_insert"], params).fetchone()
            if row is not None:
                conn.execute(Q["job_insert"], {"kind": "detect", "ref": str(row[0])})
                return IngestResult(int(row[0]), digest, replay=False)
        stored = self.conn.execute(
            Q["event_by_replay_key"], {"node_id": node_id, "request_id": event.request_id}
        ).fetchone()
        if stored["digest"] != digest:
            raise DigestConflict(node_id, event.request_id)
        return IngestResult(int(stored["id"]), stored["digest"], replay=True)

    async def add_agent(self, agent_id: str, endpoint: str) -> None:
        """Register (or update) an agent."""
        self.conn.execute(Q["agent_upsert"], {"agent_id": agent_id, "endpoint": endpoint})

    async def redeliver(self, event_id: int) -> None:
        """Insert a second detection job for ``event_id`` (a duplicate delivery)."""
        self.conn.execute(Q["job_insert"], {"kind": "detect", "ref": str(event_id)})

    async def scan(self) -> int:
        """Insert a delivery job for every agent with unsent work; return how many."""
        agents = [r[0] for r in self.conn.execute(Q["agents_with_pending_work"]).fetchall()]
        for agent_id in agents:
            self.conn.execute(Q["job_insert"], {"kind": "deliver", "ref": agent_id})
        return len(agents)

    async def pending_jobs(self) -> int:
        """Lab jobs not done yet."""
        return len(self.conn.execute(Q["job_list_pending"]).fetchall())

    async def process(self, *, within: float = 30.0) -> None:
        """Run lab jobs one at a time, oldest first, until none is left."""
        async with asyncio.timeout(within):
            while True:
                job = self.conn.execute(Q["job_next"]).fetchone()
                if job is None:
                    return
                if job["attempts"] >= MAX_ATTEMPTS:
                    raise RuntimeError(f"lab job {job['id']} failed {MAX_ATTEMPTS} times")
                self.conn.execute(Q["job_attempt"], {"id": job["id"]})
                with contextlib.suppress(Exception):
                    await self._run(job)
                await asyncio.sleep(0)

    async def _run(self, job: sqlite3.Row) -> None:
        if job["kind"] == "detect":
            event = self.conn.execute(Q["event_get"], {"id": int(job["ref"])}).fetchone()
            with _tx(self.conn) as conn:
                if event is not None:
                    await apply_event(_DetectionTx(conn, self.clock), _event(event), self.faults)
                conn.execute(Q["job_done"], {"id": job["id"], "done_ms": self.clock()})
            return
        agent_id = job["ref"]
        agent = self.conn.execute(Q["agent_get"], {"agent_id": agent_id}).fetchone()
        endpoint = agent["endpoint"]

        async def send(_agent: str, snapshot: Snapshot) -> int:
            status: int = await self.send(endpoint, snapshot)
            return status

        with contextlib.suppress(Abandoned):
            await deliver_agent(
                _Delivery(self.conn),
                agent_id,
                sign=self.signer.sign,
                send=send,
                now_ms=self.clock(),
                faults=self.faults,
            )
        self.conn.execute(Q["job_done"], {"id": job["id"], "done_ms": self.clock()})

    async def state(self) -> dict[str, Any]:
        """Every detector table as plain data keyed by what both stores share."""
        c = self.conn
        events = c.execute(Q["event_list"]).fetchall()
        by_id = {e["id"]: (e["node_id"], e["request_id"]) for e in events}
        snapshots = c.execute(Q["snapshot_list"]).fetchall()
        decisions = c.execute(Q["decision_list"]).fetchall()
        intents = c.execute(Q["intent_list"]).fetchall()
        targets = {
            d["id"]: (d["site"], d["address"], d["rule_version"], d["expires_ms"])
            for d in decisions
        }
        return {
            "events": [
                (e["node_id"], e["request_id"], e["digest"], e["occurred_ms"]) for e in events
            ],
            "counters": {r["key"]: r["hits"] for r in c.execute(Q["counter_list"]).fetchall()},
            "decisions": [
                (
                    d["site"],
                    d["address"],
                    d["rule_version"],
                    by_id[d["event_id"]],
                    d["decided_ms"],
                    d["expires_ms"],
                )
                for d in decisions
            ],
            "intents": sorted((i["agent_id"], i["snapshot_revision"] is not None) for i in intents),
            "coverage": sorted(
                (i["agent_id"], i["snapshot_revision"], targets[i["decision_id"]])
                for i in intents
                if i["snapshot_revision"] is not None
            ),
            "snapshots": [
                (
                    s["agent_id"],
                    s["revision"],
                    s["signature"] is not None,
                    s["delivered_ms"] is not None,
                )
                for s in snapshots
            ],
            "snapshot_bodies": {
                (s["agent_id"], s["revision"]): bytes(s["body"]) for s in snapshots
            },
        }
