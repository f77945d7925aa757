"""Ingest as a use case: validate an authenticated node's event, then store it.

Validation (known rule version, freshness) comes before any write, so bad
input changes nothing, on either store. The HTTP layer and the demo both call
:func:`accept`.
"""

from __future__ import annotations

from detector.domain import EventIn, IngestResult, check_fresh, rule_for
from detector.port import DetectorStore

__all__ = ["accept"]


async def accept(
    store: DetectorStore, node_id: str, event: EventIn, *, now_ms: int
) -> IngestResult:
    """Check the event's rule and freshness, then ingest it (raises ValueError when refused)."""
    rule_for(event.rule_version)
    check_fresh(event.occurred_ms, now_ms)
    return await store.ingest(node_id, event, now_ms=now_ms)
