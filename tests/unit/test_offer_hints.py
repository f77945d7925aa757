"""The producer's offer hints: where a single enqueue looks for an idle worker's offer."""

from __future__ import annotations

from jobrun.postgres.offer_hints import MAX_REMEMBERED_QUEUES, OfferHints


def test_a_queue_never_enqueued_to_is_looked_at() -> None:
    assert OfferHints().worth_looking("default")


def test_a_queue_found_without_offers_is_not_looked_at_until_one_is_seen() -> None:
    hints = OfferHints()
    hints.found("default", False)
    assert not hints.worth_looking("default")
    hints.found("default", False)
    assert not hints.worth_looking("default")
    hints.found("default", True)
    assert hints.worth_looking("default")


def test_each_queue_has_its_own_hint_whatever_its_name() -> None:
    hints = OfferHints()
    names = ["a", "a/b", "..", "a,b", "A", "é ✓", "x" * 128]
    hints.found(names[0], False)
    assert [hints.worth_looking(n) for n in names] == [False] + [True] * (len(names) - 1)
    for name in names:
        hints.found(name, False)
    hints.found("a,b", True)
    assert [n for n in names if hints.worth_looking(n)] == ["a,b"]


def test_past_its_bound_the_memory_starts_afresh() -> None:
    hints = OfferHints()
    for i in range(MAX_REMEMBERED_QUEUES):
        hints.found(f"q{i}", False)
    assert not any(hints.worth_looking(f"q{i}") for i in range(MAX_REMEMBERED_QUEUES))
    hints.found("one more", False)
    assert not hints.worth_looking("one more")
    assert all(hints.worth_looking(f"q{i}") for i in range(MAX_REMEMBERED_QUEUES))
