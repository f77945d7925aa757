"""A producer's memory of which queues had no idle worker's offer at its last enqueue.

A single enqueue may be handed straight to an idle worker (handoff, migration
00009), but looking for that worker's offer is paid by every enqueue, offer or
not: on the server it costs about as much as the rest of the insert. So a
producer looks only where looking has lately paid. After an enqueue to a queue
finds no offer, the next ones to that queue send the plain statement
(``JobInsertQueuedNotify``), which also reports whether an offer exists now;
once one does, the producer looks again.

Invariants:

* Only the choice of statement follows the hint, never what happens to a
  job: a job that is not handed off is queued and its queue notified, and an
  idle worker wakes and claims it. A stale hint costs one job a claim round
  trip of latency, or one enqueue the cost of the look; nothing else.
* A queue the producer has not enqueued to yet is looked at.
* The memory is bounded (:data:`MAX_REMEMBERED_QUEUES`): past that many
  queues it starts afresh, looking everywhere again.
* Safe to share between threads (a sync store's callers): each update is one
  set operation, and a race only picks the other statement once.
"""

from __future__ import annotations

__all__ = ["MAX_REMEMBERED_QUEUES", "OfferHints"]

MAX_REMEMBERED_QUEUES = 1024
"""How many queues without offers a producer remembers before it starts afresh."""


class OfferHints:
    """Which queues a producer last found without an idle worker's offer."""

    __slots__ = ("_without",)

    def __init__(self) -> None:
        self._without: set[str] = set()

    def worth_looking(self, queue: str) -> bool:
        """Whether the next single enqueue to ``queue`` should look for an offer."""
        return queue not in self._without

    def found(self, queue: str, offered: bool) -> None:
        """Record whether an enqueue to ``queue`` found (or saw) an idle worker's offer."""
        if offered:
            self._without.discard(queue)
            return
        if len(self._without) >= MAX_REMEMBERED_QUEUES:
            self._without.clear()
        self._without.add(queue)
