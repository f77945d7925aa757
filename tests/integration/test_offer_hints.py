"""A producer looks for an idle worker's offer only where its last enqueue found one.

Checked through what the database holds after each single enqueue: a job
handed to the offer comes back leased and takes a slot; a job sent by the
statement that never looks is queued, wakes its queue, and leaves the offer
as it was, but tells the producer an offer stands, so the next one looks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from jobrun.domain import HandoffOffer, JobState, NewJob
from jobrun.postgres import Store, SyncProducer
from jobrun.postgres.pool import Pool

OWNER = "worker-a"
CHANNEL = "jobrun.handoff.hints000"
OFFER = HandoffOffer(channel=CHANNEL, ttl=timedelta(seconds=30))
LEASE = timedelta(seconds=30)


@pytest.fixture
async def listener(db_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    conn = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    await conn.execute(f'LISTEN "{CHANNEL}"')
    await conn.execute("LISTEN jobrun")
    try:
        yield conn
    finally:
        await conn.close()


async def notes(conn: psycopg.AsyncConnection[Any]) -> list[tuple[str, str]]:
    return [(n.channel, n.payload) async for n in conn.notifies(timeout=0.3)]


async def offer_slots(store: Store, queue: str = "default") -> int:
    (offer,) = [o for o in await store.offers() if o.queue == queue]
    return offer.slots


async def test_after_an_enqueue_without_offers_the_next_sees_an_offer_and_the_one_after_takes_it(
    pool: Pool, listener: psycopg.AsyncConnection[Any]
) -> None:
    store = Store(pool)
    first = await store.enqueue(NewJob(type="ping"))  # nobody offers anything yet
    assert first.state is JobState.QUEUED
    await store.claim(["default"], OWNER, 10, LEASE, offer=OFFER)  # claims `first`
    await notes(listener)

    seen = await store.enqueue(NewJob(type="ping"))
    assert (seen.state, seen.lease_owner, seen.attempts) == (JobState.QUEUED, None, 0)
    assert await notes(listener) == [("jobrun", "default")]  # the worker wakes and claims it
    assert await offer_slots(store) == 9  # the look was skipped, the slot left standing

    handed = await store.enqueue(NewJob(type="ping"))
    assert (handed.state, handed.lease_owner, handed.attempts) == (JobState.LEASED, OWNER, 1)
    assert [channel for channel, _ in await notes(listener)] == [CHANNEL]
    assert await offer_slots(store) == 8
    assert await store.get(handed.id) == handed


async def test_once_the_offers_run_out_the_producer_stops_looking_until_one_stands_again(
    pool: Pool,
) -> None:
    store = Store(pool)
    await store.claim(["default"], OWNER, 1, LEASE, offer=OFFER)
    states = [(await store.enqueue(NewJob(type="ping"))).state for _ in range(3)]
    assert states == [JobState.LEASED, JobState.QUEUED, JobState.QUEUED]
    # The worker claims again with slots free: a new offer. The next enqueue
    # still skips the look (and sees it); the one after is handed.
    await store.claim(["default"], OWNER, 5, LEASE, offer=OFFER)
    states = [(await store.enqueue(NewJob(type="ping"))).state for _ in range(2)]
    assert states == [JobState.QUEUED, JobState.LEASED]


async def test_a_queue_without_offers_does_not_stop_handoff_to_another(pool: Pool) -> None:
    store = Store(pool)
    for queue in ("a/b", "a..b", "é✓"):
        made = await store.enqueue(NewJob(type="ping", queue=queue))
        assert made.state is JobState.QUEUED
    await store.claim(["default"], OWNER, 10, LEASE, offer=OFFER)
    made = await store.enqueue(NewJob(type="ping"))
    assert (made.state, made.lease_owner) == (JobState.LEASED, OWNER)


async def test_a_job_that_may_not_be_handed_off_still_tells_the_producer_an_offer_stands(
    pool: Pool,
) -> None:
    store = Store(pool)
    await store.enqueue(NewJob(type="ping"))  # no offers: stop looking
    await store.claim(["default"], OWNER, 10, LEASE, offer=OFFER)  # claims it, offers 9
    delayed = await store.enqueue(NewJob(type="ping", delay=timedelta(seconds=60)))
    keyed = await store.enqueue(NewJob(type="ping", idempotency_key="k"))
    assert [delayed.state, keyed.state] == [JobState.QUEUED, JobState.QUEUED]
    assert await offer_slots(store) == 9
    made = await store.enqueue(NewJob(type="ping"))
    assert made.state is JobState.LEASED


async def test_an_enqueue_in_the_callers_transaction_leaves_the_offer_and_tells_the_producer(
    pool: Pool,
) -> None:
    store = Store(pool)
    await store.enqueue(NewJob(type="ping"))
    await store.claim(["default"], OWNER, 10, LEASE, offer=OFFER)  # claims it, offers 9
    async with pool.connection() as conn, conn.transaction():
        inside = await store.enqueue(NewJob(type="ping"), conn=conn)
    assert inside.state is JobState.QUEUED
    assert await offer_slots(store) == 9
    assert (await store.enqueue(NewJob(type="ping"))).state is JobState.LEASED


async def test_a_replayed_idempotency_key_returns_the_stored_job_without_a_second_row(
    pool: Pool,
) -> None:
    store = Store(pool)
    first = await store.enqueue(NewJob(type="ping", idempotency_key="same"))
    again = await store.enqueue(NewJob(type="ping", idempotency_key="same"))
    assert again == first
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM jobs WHERE idempotency_key = 'same'")
        assert await cur.fetchone() == (1,)


async def test_the_sync_producer_follows_the_same_hints(pool: Pool, db_url: str) -> None:
    store = Store(pool)
    with SyncProducer(db_url) as producer:
        assert producer.enqueue(NewJob(type="ping")).state is JobState.QUEUED
        await store.claim(["default"], OWNER, 10, LEASE, offer=OFFER)
        states = [producer.enqueue(NewJob(type="ping")).state for _ in range(2)]
    assert states == [JobState.QUEUED, JobState.LEASED]
