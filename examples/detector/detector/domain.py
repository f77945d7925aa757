"""What the detector decides, with no storage in it: events, rules, digests, snapshots.

Both stores (the SQLite laboratory and PostgreSQL) call these functions, so a
decision is made in one place and the two cannot drift apart.

Window model: a *rolling* window. Each rule counts the hits of one shared key
whose event times fall in ``(t - window, t]``; an event is judged by every
window that contains it (those ending at a hit at or after it), so a burst
split across any boundary is still seen. Fixed buckets were rejected: a burst
of ``threshold`` events straddling a bucket edge would never trigger.

Out-of-order events: an event is placed at its own time (``occurred_ms``), not
at its arrival; a late event that completes a burst triggers the decision when
it arrives. Freshness exclusion comes first: an event more than
:data:`FRESHNESS_MS` away from the ingesting server's clock (late or early) is
refused at ingest and never counted, which also bounds how far back a late
event can reach.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "FRESHNESS_MS",
    "MAX_BODY_BYTES",
    "RULES",
    "SNAPSHOT_FRESH_MS",
    "DigestConflict",
    "EventIn",
    "IngestResult",
    "Rule",
    "StoredEvent",
    "UnknownRule",
    "canonical_event",
    "check_fresh",
    "decision_expiry",
    "event_digest",
    "rule_for",
    "shared_key",
    "snapshot_bytes",
]

FRESHNESS_MS = 5 * 60 * 1000
"""How far an event's time may be from the server's clock, either way."""
MAX_BODY_BYTES = 16 * 1024
"""The largest request body ingest reads."""
SNAPSHOT_FRESH_MS = 60 * 1000
"""How long a stored, unsent snapshot may be retried as is before it is re-derived."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A detection rule: ``threshold`` hits within ``window_ms`` ban for ``ban_ms``."""

    version: str
    threshold: int
    window_ms: int
    ban_ms: int


RULES: dict[str, Rule] = {
    "v1": Rule("v1", threshold=5, window_ms=60_000, ban_ms=10 * 60_000),
    "v2": Rule("v2", threshold=3, window_ms=10_000, ban_ms=60 * 60_000),
}
"""The rule versions the detector knows; an event naming another is refused."""


class UnknownRule(ValueError):
    """An event names a rule version the detector does not know."""


class DigestConflict(Exception):
    """A (node, request id) already stored with a different digest: not a replay."""

    def __init__(self, node_id: str, request_id: str) -> None:
        super().__init__(
            f"request {request_id!r} of node {node_id!r} was already ingested with other content"
        )


class EventIn(BaseModel):
    """An event as a node sends it (the node itself comes from authentication)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str = Field(min_length=1, max_length=128)
    site: str = Field(min_length=1, max_length=255)
    address: str = Field(min_length=1, max_length=255)
    rule_version: str = Field(min_length=1, max_length=32)
    occurred_ms: int = Field(ge=0, lt=2**53)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as stored, with its id and digest."""

    id: int
    node_id: str
    request_id: str
    site: str
    address: str
    rule_version: str
    occurred_ms: int
    received_ms: int
    digest: str


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What ingest did: ``created`` a new event and its job, or found a ``replay``."""

    event_id: int
    digest: str
    replay: bool


def rule_for(version: str) -> Rule:
    """The rule of ``version``; raises :class:`UnknownRule`."""
    try:
        return RULES[version]
    except KeyError:
        raise UnknownRule(f"unknown rule version {version!r}") from None


def check_fresh(occurred_ms: int, now_ms: int) -> None:
    """Raise ValueError when the event's time is beyond the freshness limit."""
    skew = occurred_ms - now_ms
    if abs(skew) > FRESHNESS_MS:
        direction = "in the future" if skew > 0 else "old"
        raise ValueError(
            f"occurred_ms is {abs(skew)} ms {direction}; the freshness limit is {FRESHNESS_MS} ms"
        )


def canonical_event(node_id: str, event: EventIn) -> bytes:
    """The canonical bytes of an event: sorted keys, no spaces, UTF-8."""
    data = {"node_id": node_id, **event.model_dump()}
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def event_digest(node_id: str, event: EventIn) -> str:
    """sha256 (hex) of :func:`canonical_event`: stored at ingest, never rewritten."""
    return hashlib.sha256(canonical_event(node_id, event)).hexdigest()


def shared_key(site: str, address: str, rule: Rule) -> str:
    """The detector's shared key: site, address, rule version and window, unambiguous."""
    return json.dumps([site, address, rule.version, rule.window_ms], separators=(",", ":"))


def decision_expiry(occurred_ms: int, rule: Rule) -> int:
    """When a ban made for an event at ``occurred_ms`` ends (fixed once, never recomputed)."""
    return occurred_ms + rule.ban_ms


def snapshot_bytes(
    agent_id: str, revision: int, generated_ms: int, decisions: list[dict[str, Any]]
) -> bytes:
    """The exact bytes of one agent's snapshot, the bytes that are signed and stored."""
    data = {
        "agent_id": agent_id,
        "revision": revision,
        "generated_ms": generated_ms,
        "decisions": decisions,
    }
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
