"""The storage port both stores implement, and the logic written once against it.

A store offers three small transactional views: what ingest needs (insert an
event with its detection job, atomically), what one detection needs inside its
transaction (:class:`DetectionTx`), and what delivery needs
(:class:`DeliveryStore`). :func:`apply_event` and :func:`deliver_agent` are the
detector's behaviour; the SQLite laboratory and PostgreSQL only move rows, so
the scenario suite checks one behaviour on two stores.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from detector.domain import (
    SNAPSHOT_FRESH_MS,
    EventIn,
    IngestResult,
    StoredEvent,
    decision_expiry,
    rule_for,
    shared_key,
)

__all__ = [
    "Abandoned",
    "DeliveryStore",
    "DetectionTx",
    "DetectorStore",
    "Faults",
    "Sender",
    "SimulatedCrash",
    "Snapshot",
    "apply_event",
    "deliver_agent",
]


class SimulatedCrash(RuntimeError):
    """Raised by fault injection to stand for a process dying at that point."""


class Abandoned(RuntimeError):
    """Raised by fault injection: the delivery job is lost after allocation (not retried).

    It stands for a job record that is gone (an operator cancelled it, a
    notification-only design dropped it): only the durable scan can repair it.
    """


@dataclass
class Faults:
    """Crashes to inject, each a count consumed as it fires (tests only)."""

    crash_in_detection_commit: int = 0
    """Detections that raise after writing their effects, before the commit."""
    crash_after_allocation: int = 0
    """Deliveries that raise after allocating a snapshot, before signing it."""
    abandon_after_allocation: int = 0
    """Deliveries whose job ends, unretried, after allocating a snapshot."""
    crash_after_send: int = 0
    """Deliveries that raise after the agent accepted, before recording it."""
    fired: list[str] = field(default_factory=list)
    """Which faults fired, in order."""

    def take(self, name: str) -> bool:
        """Consume one fault of ``name``; True when it should fire now."""
        left: int = getattr(self, name)
        if left <= 0:
            return False
        setattr(self, name, left - 1)
        self.fired.append(name)
        return True


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A stored snapshot: exact bytes, and their signature once signed."""

    agent_id: str
    revision: int
    body: bytes
    signature: bytes | None
    created_ms: int


Sender = Callable[[str, Snapshot], Awaitable[int]]
"""Posts a signed snapshot to an agent (by id); returns the HTTP status."""


class DetectionTx(Protocol):
    """The reads and writes of one detection, all in one transaction with the job's completion."""

    async def hit_insert(self, event: StoredEvent, key: str) -> bool:
        """Record the event as counted under ``key``; False when it already was."""
        ...

    async def counter_get(self, key: str) -> int:
        """The key's total count (0 when none)."""
        ...

    async def counter_set(self, key: str, hits: int) -> None:
        """Write the key's total count."""
        ...

    async def window_max(self, key: str, occurred_ms: int, window_ms: int) -> int:
        """The largest rolling-window count among windows containing ``occurred_ms``."""
        ...

    async def decision_active(self, event: StoredEvent, at_ms: int) -> bool:
        """True when a ban on the event's target is in force at ``at_ms``."""
        ...

    async def decide(self, event: StoredEvent, expires_ms: int) -> None:
        """Write the decision and, with it, delivery intent (and work) for every agent."""
        ...


async def apply_event(tx: DetectionTx, event: StoredEvent, faults: Faults | None = None) -> bool:
    """Count ``event`` under its shared key and decide; True when it was new to the count.

    The caller holds the shared key's lock and commits with the job's
    completion. A redelivered event changes nothing (its hit row exists).
    """
    rule = rule_for(event.rule_version)
    key = shared_key(event.site, event.address, rule)
    if not await tx.hit_insert(event, key):
        return False
    await tx.counter_set(key, await tx.counter_get(key) + 1)
    in_window = await tx.window_max(key, event.occurred_ms, rule.window_ms)
    if in_window >= rule.threshold and not await tx.decision_active(event, event.occurred_ms):
        await tx.decide(event, decision_expiry(event.occurred_ms, rule))
    if faults is not None and faults.take("crash_in_detection_commit"):
        raise SimulatedCrash("detection crashed before its commit")
    return True


class DeliveryStore(Protocol):
    """The transactions of one agent's delivery; each method is its own transaction."""

    async def pending_snapshot(self, agent_id: str) -> tuple[Snapshot | None, bool]:
        """The newest stored, unsent snapshot, and whether intent exists that it lacks."""
        ...

    async def allocate_snapshot(self, agent_id: str, now_ms: int) -> Snapshot:
        """Derive the full snapshot, take the next revision, store the bytes unsigned.

        In one transaction: the revision, the bytes, the intents it covers and
        the superseding of older unsent snapshots commit together or not at all.
        """
        ...

    async def sign_snapshot(self, snapshot: Snapshot, signature: bytes) -> None:
        """Store the signature of the stored bytes (kept if one is already there)."""
        ...

    async def mark_delivered(self, snapshot: Snapshot, now_ms: int) -> None:
        """Record that the agent accepted the snapshot."""
        ...


async def deliver_agent(
    store: DeliveryStore,
    agent_id: str,
    *,
    sign: Callable[[bytes], bytes],
    send: Sender,
    now_ms: int,
    faults: Faults | None = None,
) -> Snapshot | None:
    """Bring one agent up to date; return the snapshot delivered (None: nothing to do).

    A stored unsent snapshot that is fresh and covers every intent is sent
    again byte for byte; a stale one, or new intent, is re-derived under a new
    revision. Signing runs here, outside any detector lock and outside the
    allocation transaction. A crash after allocation leaves an unsigned
    snapshot that the retry signs and sends; the agent ignores a revision
    older than one it holds (HTTP 409), which also counts as delivered.
    """
    snapshot, uncovered = await store.pending_snapshot(agent_id)
    stale = snapshot is not None and now_ms - snapshot.created_ms > SNAPSHOT_FRESH_MS
    if snapshot is None or stale or uncovered:
        if snapshot is None and not uncovered:
            return None
        snapshot = await store.allocate_snapshot(agent_id, now_ms)
        if faults is not None and faults.take("crash_after_allocation"):
            raise SimulatedCrash("delivery crashed between allocation and signing")
        if faults is not None and faults.take("abandon_after_allocation"):
            raise Abandoned("delivery job lost between allocation and signing")
    if snapshot.signature is None:
        signature = sign(snapshot.body)
        await store.sign_snapshot(snapshot, signature)
        snapshot = Snapshot(
            snapshot.agent_id, snapshot.revision, snapshot.body, signature, snapshot.created_ms
        )
    status = await send(agent_id, snapshot)
    if status not in (200, 204, 409):
        raise RuntimeError(
            f"agent {agent_id} answered HTTP {status} to revision {snapshot.revision}"
        )
    if faults is not None and faults.take("crash_after_send"):
        raise SimulatedCrash("delivery crashed after the agent accepted")
    await store.mark_delivered(snapshot, now_ms)
    return snapshot


class DetectorStore(Protocol):
    """A whole detector store, as the scenario suite drives it."""

    faults: Faults

    async def ingest(self, node_id: str, event: EventIn, *, now_ms: int) -> IngestResult:
        """Store the event and its detection job in one transaction, or find its replay.

        Raises :class:`~detector.domain.DigestConflict` when the (node,
        request id) is stored with another digest; nothing is written then.
        """
        ...

    async def add_agent(self, agent_id: str, endpoint: str) -> None:
        """Register (or update) an agent that receives snapshots."""
        ...

    async def redeliver(self, event_id: int) -> None:
        """Enqueue another detection job for a stored event (a duplicate delivery)."""
        ...

    async def process(self, *, within: float = 30.0) -> None:
        """Run pending detection and delivery jobs until none is left (or raise TimeoutError)."""
        ...

    async def scan(self) -> int:
        """The durable scan: enqueue delivery for every agent with unsent work; return how many."""
        ...

    async def state(self) -> dict[str, Any]:
        """Events, counters, decisions, intents and snapshots, as plain data for comparison.

        ``coverage`` lists each covered intent as (agent, revision, (site,
        address, rule version, expiry) of its decision): the bytes of that
        revision must hold that decision unless it had expired when they were
        generated.
        """
        ...
