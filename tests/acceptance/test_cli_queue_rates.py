"""Changing a queue's rate with ``jobrun queues limit`` while its jobs are being claimed."""

from __future__ import annotations

from datetime import timedelta

from tests.acceptance.test_cli import ok

from jobrun.domain import NewJob
from jobrun.postgres import SyncStore, open_sync_pool

LEASE = timedelta(seconds=60)


def test_a_rate_changed_to_a_longer_interval_lets_the_next_claim_take_jobs(db_url: str) -> None:
    with open_sync_pool(db_url, max_size=2) as pool:
        store = SyncStore(pool)
        store.enqueue_batch([NewJob(type="t", queue="rated") for _ in range(10)])
        ok("queues", "limit", "rated", "--rate", "2/1s", "--database-url", db_url)
        assert len(store.claim(["rated"], "w1", 10, LEASE)) == 2
        out = ok("queues", "limit", "rated", "--rate", "5/1h", "--database-url", db_url)
        assert "rate 5/1h" in out
        # Not at the next hour: the new rate's window starts now.
        assert len(store.claim(["rated"], "w1", 10, LEASE)) == 5
