"""Handoff on a real server: offers written by claims, jobs leased by their own enqueue.

An idle worker's claim offers the slots it leaves free; a single enqueue due
now takes one and inserts its job leased to that worker, sending the whole job
on the worker's channel. These tests drive the store and a plain LISTEN
connection, the way the worker and its notifier use them, and check what the
database holds after each step: who holds the job, which attempt, which
events, what is left of the offer, and what the reaper does with a handed job
nobody confirmed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from jobrun.domain import (
    HANDOFF_CONFIRM_WITHIN,
    HandoffOffer,
    Job,
    JobState,
    NewJob,
    Outcome,
    OutcomeKind,
)
from jobrun.errors import LeaseLost
from jobrun.postgres import Store
from jobrun.postgres.convert import job_from_handoff
from jobrun.postgres.pool import Pool, open_pool
from jobrun.postgres.preparing import HANDOFF_MAX_BYTES
from jobrun.testing import eventually

OWNER = "worker-a"
CHANNEL = "jobrun.handoff.test0000"
LEASE = timedelta(seconds=30)
OFFER = HandoffOffer(channel=CHANNEL, ttl=timedelta(seconds=30))


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


@pytest.fixture
async def listener(db_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """LISTENs on the offer's channel and on the wake-up channel, as a notifier does."""
    conn = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    await conn.execute(f'LISTEN "{CHANNEL}"')
    await conn.execute("LISTEN jobrun")
    try:
        yield conn
    finally:
        await conn.close()


async def notes(conn: psycopg.AsyncConnection[Any], wait: float = 0.3) -> list[tuple[str, str]]:
    """Every notification that arrives within ``wait`` seconds, as (channel, payload)."""
    got: list[tuple[str, str]] = []
    async for note in conn.notifies(timeout=wait):
        got.append((note.channel, note.payload))
    return got


async def idle_claim(store: Store, limit: int = 10, **kw: Any) -> list[Job]:
    kw.setdefault("offer", OFFER)
    return await store.claim(["default"], OWNER, limit, kw.pop("lease", LEASE), **kw)


async def handed_flag(pool: Pool, job: Job) -> bool:
    async with pool.connection() as conn:
        cur = await conn.execute("SELECT handed FROM jobs WHERE id = %s", (job.id,))
        row = await cur.fetchone()
    assert row is not None
    return bool(row[0])


async def test_an_idle_claim_offers_its_free_slots_for_each_of_its_queues(store: Store) -> None:
    await store.enqueue_batch([NewJob(type="t", queue="mail")])
    claimed = await store.claim(["default", "mail"], OWNER, 10, LEASE, offer=OFFER)
    assert len(claimed) == 1
    offers = await store.offers()
    assert [(o.queue, o.owner, o.slots, o.channel) for o in offers] == [
        ("default", OWNER, 9, CHANNEL),
        ("mail", OWNER, 9, CHANNEL),
    ]
    # A handed job's lease is the short one its worker must confirm it within.
    assert OFFER.confirm_within == HANDOFF_CONFIRM_WITHIN < LEASE
    assert all(o.lease == HANDOFF_CONFIRM_WITHIN for o in offers)
    now = await store.now()
    assert all(now < o.expires_at <= now + OFFER.ttl for o in offers)


async def test_a_full_claim_or_one_without_an_offer_withdraws_the_owners_offers(
    store: Store,
) -> None:
    await idle_claim(store)
    assert len(await store.offers()) == 1
    await store.enqueue_batch([NewJob(type="t") for _ in range(3)])
    assert len(await idle_claim(store, limit=3)) == 3  # full: no slot left to offer
    assert await store.offers() == []
    await idle_claim(store)
    await store.claim(["default"], OWNER, 10, LEASE)  # no offer: withdrawn
    assert await store.offers() == []
    await idle_claim(store)
    assert await store.retract_offers(OWNER) == 1
    assert await store.offers() == []


async def test_a_claim_of_other_queues_drops_the_offers_of_queues_it_left(store: Store) -> None:
    await store.claim(["default", "mail"], OWNER, 5, LEASE, offer=OFFER)
    await store.claim(["mail"], OWNER, 5, LEASE, offer=OFFER)
    assert [o.queue for o in await store.offers()] == ["mail"]


async def test_an_enqueue_due_now_is_leased_to_the_offer_and_sent_whole(
    store: Store, pool: Pool, listener: psycopg.AsyncConnection[Any]
) -> None:
    await idle_claim(store, limit=4)
    made = await store.enqueue(NewJob(type="ping", payload={"n": 1, "text": "é ✓"}, priority=3))
    assert made.state is JobState.LEASED
    assert (made.lease_owner, made.attempts) == (OWNER, 1)
    assert made.lease_expires_at is not None
    stored = await store.get(made.id)
    assert stored == made
    assert await handed_flag(pool, made)

    received = await notes(listener)
    assert [channel for channel, _ in received] == [CHANNEL]  # no queue wake-up
    assert job_from_handoff(received[0][1]) == made

    events = await store.events(made.id)
    assert [(e.kind, e.from_state, e.to_state, e.attempt, e.owner) for e in events] == [
        ("enqueued", None, JobState.QUEUED, 0, None),
        ("claimed", JobState.QUEUED, JobState.LEASED, 1, OWNER),
    ]
    (offer,) = await store.offers()
    assert offer.slots == 3


async def test_the_handed_job_completes_under_the_lease_fence_like_a_claimed_one(
    store: Store,
) -> None:
    await idle_claim(store)
    made = await store.enqueue(NewJob(type="ping"))
    done = await store.complete(made, OWNER)
    assert (done.state, done.attempts) == (JobState.SUCCEEDED, 1)
    assert [e.kind for e in await store.events(made.id)] == ["enqueued", "claimed", "succeeded"]


async def test_without_claim_events_a_handed_job_records_only_its_enqueue(pool: Pool) -> None:
    store = Store(pool, event_mode="terminal")
    await store.claim(["default"], OWNER, 2, LEASE, offer=OFFER)
    made = await store.enqueue(NewJob(type="ping"))
    assert made.state is JobState.LEASED
    assert [e.kind for e in await store.events(made.id)] == ["enqueued"]


async def test_offers_run_out_after_their_slots(store: Store) -> None:
    await idle_claim(store, limit=2)
    made = [await store.enqueue(NewJob(type="ping")) for _ in range(3)]
    assert [j.state for j in made] == [JobState.LEASED, JobState.LEASED, JobState.QUEUED]
    (offer,) = await store.offers()
    assert offer.slots == 0


def _big_payload() -> dict[str, str]:
    return {"blob": "x" * (HANDOFF_MAX_BYTES + 1)}


@pytest.mark.parametrize(
    ("case", "job"),
    [
        ("idempotency key", NewJob(type="ping", idempotency_key="k1")),
        ("delay", NewJob(type="ping", delay=timedelta(seconds=5))),
        ("delay of zero", NewJob(type="ping", delay=timedelta(0))),
        ("payload too big to travel", NewJob(type="ping", payload=_big_payload())),
        ("another queue", NewJob(type="ping", queue="elsewhere")),
    ],
)
async def test_jobs_that_are_never_handed_off_are_queued_and_wake_the_queue(
    store: Store, listener: psycopg.AsyncConnection[Any], case: str, job: NewJob
) -> None:
    await idle_claim(store)
    made = await store.enqueue(job)
    if case == "delay of zero":
        # A zero delay is due now: it is handed like a job without one.
        assert made.state is JobState.LEASED
        return
    assert made.state is JobState.QUEUED, case
    assert made.lease_owner is None
    received = await notes(listener)
    assert received == ([("jobrun", job.queue)] if case != "delay" else [("jobrun", "default")])
    (offer,) = await store.offers()
    assert offer.slots == 10


async def test_an_offer_of_an_owner_too_long_to_travel_is_not_taken(store: Store) -> None:
    # The owner goes into the notification with the job; a notification over
    # 8000 bytes would fail the enqueue itself.
    owner = "w" * 201
    await store.claim(["default"], owner, 5, LEASE, offer=OFFER)
    assert [o.owner for o in await store.offers()] == [owner]
    made = await store.enqueue(NewJob(type="ping", payload={"blob": "x" * 2900}))
    assert made.state is JobState.QUEUED


async def test_the_largest_job_that_travels_fits_in_a_notification(
    store: Store, listener: psycopg.AsyncConnection[Any]
) -> None:
    # At the limits: 200 bytes of owner, the payload, type, queue and trace
    # context at HANDOFF_MAX_BYTES in all, and a payload that jsonb renders
    # half as long again (it adds a space after every comma).
    owner = "o" * 200
    await store.claim(["q" * 100], owner, 5, LEASE, offer=OFFER)
    size = HANDOFF_MAX_BYTES - 100 - 200
    payload = [1] * (size // 2 - 1)
    job = NewJob(type="t" * 200, queue="q" * 100, payload=payload)
    made = await store.enqueue(job)
    assert made.state is JobState.LEASED
    ((_, text),) = await notes(listener)
    assert 4000 < len(text.encode()) < 8000
    assert job_from_handoff(text) == made


# 1.3 kB of JSON, within every size check made before the statement, but
# jsonb writes each of these numbers out in full (42 characters): the job would
# travel as some 9.7 kB, over the 8000 bytes a notification may hold.
WIDE_PAYLOAD = {"p": [1e-40] * 220}


async def test_a_job_whose_handoff_text_would_pass_notifys_limit_is_queued_and_wakes_the_queue(
    store: Store, pool: Pool, listener: psycopg.AsyncConnection[Any]
) -> None:
    await idle_claim(store)
    made = await store.enqueue(NewJob(type="ping", payload=WIDE_PAYLOAD))
    assert (made.state, made.lease_owner, made.attempts) == (JobState.QUEUED, None, 0)
    assert await store.get(made.id) == made
    assert made.payload == WIDE_PAYLOAD
    async with pool.connection() as conn:
        cur = await conn.execute(
            "SELECT octet_length(payload::text) FROM jobs WHERE id = %s", (made.id,)
        )
        row = await cur.fetchone()
    assert row is not None and row[0] > 8000  # as jsonb renders it: it could not travel
    assert await notes(listener) == [("jobrun", "default")]  # the plain wake-up instead
    (offer,) = await store.offers()
    assert offer.slots == 10  # not taken
    # A job that fits still goes by handoff through the same offer.
    small = await store.enqueue(NewJob(type="ping", payload={"p": [1e-40] * 20}))
    assert small.state is JobState.LEASED


async def test_the_sync_producer_queues_a_job_too_wide_to_hand_off(
    store: Store, db_url: str
) -> None:
    from jobrun.postgres import SyncProducer

    await idle_claim(store)
    with SyncProducer(db_url) as producer:
        made = producer.enqueue(NewJob(type="ping", payload=WIDE_PAYLOAD))
    assert made.state is JobState.QUEUED
    assert await store.get(made.id) == made


async def test_an_offer_on_a_channel_notify_refuses_is_not_taken(store: Store) -> None:
    # 40 characters pass the table's check, but they are 80 bytes: pg_notify
    # refuses a channel name over 63, which would fail the producer's enqueue.
    await idle_claim(store, offer=HandoffOffer(channel="é" * 40, ttl=timedelta(seconds=30)))
    made = await store.enqueue(NewJob(type="ping"))
    assert made.state is JobState.QUEUED


@pytest.mark.parametrize("channel", ["x" * 64, "é" * 32, "a\x00b", ""])
async def test_a_notify_channel_postgres_cannot_use_is_refused_when_the_store_is_made(
    pool: Pool, db_url: str, channel: str
) -> None:
    from jobrun.errors import ConfigurationError
    from jobrun.postgres import SyncProducer

    with pytest.raises(ConfigurationError, match="notify_channel"):
        Store(pool, notify_channel=channel)
    with pytest.raises(ConfigurationError, match="notify_channel"):
        SyncProducer(db_url, notify_channel=channel)
    assert Store(pool, notify_channel="é" * 31).notify_channel == "é" * 31  # 62 bytes


async def test_a_run_at_already_past_is_not_handed_off(store: Store) -> None:
    await idle_claim(store)
    past = await store.now() - timedelta(seconds=5)
    made = await store.enqueue(NewJob(type="ping", run_at=past))
    assert made.state is JobState.QUEUED


async def test_a_job_enqueued_in_the_callers_transaction_is_never_handed_off(
    store: Store, pool: Pool
) -> None:
    await idle_claim(store)
    async with pool.connection() as conn, conn.transaction():
        made = await store.enqueue(NewJob(type="ping"), conn=conn)
    assert made.state is JobState.QUEUED
    assert (await store.get(made.id)).state is JobState.QUEUED


@pytest.mark.parametrize("control", ["paused", "concurrency", "rate"])
async def test_a_queue_with_controls_is_never_handed_to(store: Store, control: str) -> None:
    await idle_claim(store)
    if control == "paused":
        await store.pause_queue("default")
    elif control == "concurrency":
        await store.set_queue_limits("default", concurrency=5)
    else:
        await store.set_queue_limits("default", rate=(5, timedelta(seconds=1)))
    made = await store.enqueue(NewJob(type="ping"))
    assert made.state is JobState.QUEUED


async def test_an_expired_offer_is_not_taken(store: Store) -> None:
    ttl = timedelta(milliseconds=50)
    await idle_claim(store, offer=HandoffOffer(channel=CHANNEL, ttl=ttl))
    offered_by = await store.now()  # the offer was made before this

    async def expired() -> bool:
        return await store.now() > offered_by + ttl

    await eventually(expired)
    made = await store.enqueue(NewJob(type="ping"))
    assert made.state is JobState.QUEUED


async def test_batch_and_bulk_enqueues_are_never_handed_off(store: Store) -> None:
    await idle_claim(store)
    batch = await store.enqueue_batch([NewJob(type="ping") for _ in range(3)])
    ids = await store.enqueue_many("ping", [{}, {}])
    states = {(await store.get(j.id)).state for j in batch if isinstance(j, Job)}
    states |= {(await store.get(i)).state for i in ids}
    assert states == {JobState.QUEUED}


async def test_the_sync_store_hands_off_as_the_async_one(store: Store, db_url: str) -> None:
    from jobrun.postgres import SyncProducer

    await idle_claim(store)
    with SyncProducer(db_url) as producer:
        made = producer.enqueue(NewJob(type="ping"))
    assert (made.state, made.lease_owner, made.attempts) == (JobState.LEASED, OWNER, 1)
    assert await store.get(made.id) == made


async def test_concurrent_enqueues_never_hand_out_more_jobs_than_the_offered_slots(
    db_url: str,
) -> None:
    # Eight producers on eight connections of their own enqueue at once
    # against one offer of five slots: the offer row's lock lets each slot go
    # to one enqueue, and SKIP LOCKED sends the others down the queue path.
    pools = [await open_pool(db_url, worker_concurrency=1) for _ in range(8)]
    try:
        stores = [Store(p) for p in pools]
        await idle_claim(stores[0], limit=5)
        start = asyncio.Event()

        async def produce(s: Store) -> list[Job]:
            await start.wait()
            return [await s.enqueue(NewJob(type="ping")) for _ in range(20)]

        tasks = [asyncio.create_task(produce(s)) for s in stores]
        start.set()
        made = [job for batch in await asyncio.gather(*tasks) for job in batch]
        handed = [j for j in made if j.state is JobState.LEASED]
        assert 1 <= len(handed) <= 5
        (offer,) = await stores[0].offers()
        assert offer.slots == 5 - len(handed)
        depth = {(d.state, d.count) for d in await stores[0].depth()}
        assert depth == {(JobState.LEASED, len(handed)), (JobState.QUEUED, 160 - len(handed))}
    finally:
        for p in pools:
            await p.close()


async def test_the_reaper_gives_back_a_handed_job_nobody_confirmed_without_counting(
    store: Store, pool: Pool
) -> None:
    await idle_claim(store, lease=timedelta(seconds=1))
    made = await store.enqueue(NewJob(type="ping", max_attempts=1))
    assert made.state is JobState.LEASED
    assert made.lease_expires_at is not None
    expires = made.lease_expires_at

    async def expired() -> bool:
        return await store.now() > expires

    await eventually(expired)
    (reaped,) = await store.reap_expired()
    # Even on its last attempt: the worker never had it, so nothing was spent.
    assert (reaped.state, reaped.attempts, reaped.lease_owner) == (JobState.QUEUED, 0, None)
    assert reaped.run_at <= await store.now()  # due at once
    assert reaped.last_error is not None and "never confirmed" in reaped.last_error
    assert not await handed_flag(pool, made)
    assert [e.kind for e in await store.events(made.id)] == ["enqueued", "claimed", "reaped"]
    # It is an ordinary queued job again: claimed as attempt 1, it runs.
    (again,) = await store.claim(["default"], "worker-b", 5, LEASE)
    assert (again.id, again.attempts) == (made.id, 1)


async def test_a_heartbeat_confirms_a_handed_job_and_then_an_expiry_counts(
    store: Store, pool: Pool
) -> None:
    await idle_claim(store, lease=timedelta(seconds=1))
    made = await store.enqueue(NewJob(type="ping", max_attempts=1))
    assert await store.heartbeat(OWNER, [made], timedelta(seconds=1)) == {made.id}
    assert not await handed_flag(pool, made)
    later = await store.now() + timedelta(seconds=5)
    (reaped,) = await store.reap_expired(now=later)
    assert (reaped.state, reaped.attempts) == (JobState.DEAD, 1)


async def test_a_cancel_requested_handed_job_ends_cancelled_when_reaped(
    store: Store,
) -> None:
    await idle_claim(store, lease=timedelta(seconds=1))
    made = await store.enqueue(NewJob(type="ping"))
    await store.cancel(made.id)
    (reaped,) = await store.reap_expired(now=await store.now() + timedelta(seconds=5))
    assert reaped.state is JobState.CANCELLED


async def test_a_job_given_back_and_claimed_again_is_no_longer_marked_handed(
    store: Store, pool: Pool
) -> None:
    await idle_claim(store)
    made = await store.enqueue(NewJob(type="ping"))
    (back,) = await store.record_outcomes(
        OWNER, [Outcome(job=made, kind=OutcomeKind.RELEASE, detail="no room")]
    )
    assert isinstance(back, Job) and (back.state, back.attempts) == (JobState.QUEUED, 0)
    (again,) = await store.claim(["default"], "worker-b", 5, timedelta(seconds=1))
    assert not await handed_flag(pool, again)
    (reaped,) = await store.reap_expired(now=await store.now() + timedelta(seconds=5))
    assert reaped.attempts == 1  # a claimed attempt that expired counts


async def test_the_handoff_json_round_trips_every_field(
    store: Store, listener: psycopg.AsyncConnection[Any]
) -> None:
    await idle_claim(store)
    job = NewJob(
        type="types/ü",
        payload={"list": [1, 2.5, None, True], "nested": {"a": "b"}, "big": 2**60},
        priority=-7,
        max_attempts=3,
        backoff={"kind": "linear", "base": timedelta(milliseconds=1500), "max": timedelta(hours=2)},
    )
    made = await store.enqueue(job)
    ((_, payload),) = await notes(listener)
    handed = job_from_handoff(payload)
    assert handed == made == await store.get(made.id)
    assert isinstance(handed.created_at, datetime) and handed.created_at.utcoffset() == timedelta(0)
    assert json.loads(payload)["payload"] == job.payload


# -- confirmation (issue 27, item 5) -------------------------------------------------------

SHORT = timedelta(milliseconds=200)


async def reaped_back(store: Store, job: Job, within: float = 10.0) -> Job:
    """Reap until ``job`` is given back (its short lease has run out); the job as reaped."""

    async def reaped() -> list[Job]:
        return [j for j in await store.reap_expired() if j.id == job.id]

    return (await eventually(reaped, within=within, what="the handed job reaped"))[0]


async def test_a_handed_job_is_leased_for_the_confirm_time_and_a_heartbeat_gives_it_the_whole_lease(
    store: Store, pool: Pool
) -> None:
    await idle_claim(store)
    made = await store.enqueue(NewJob(type="ping"))
    assert made.lease_expires_at is not None
    # Not the worker's 30 s: a job its worker never received is claimable again soon.
    assert made.lease_expires_at - made.created_at == HANDOFF_CONFIRM_WITHIN
    assert await store.get(made.id) == made
    assert await store.heartbeat(OWNER, [made], LEASE) == {made.id}  # the confirmation
    confirmed = await store.get(made.id)
    assert confirmed.lease_expires_at is not None
    assert confirmed.lease_expires_at >= made.created_at + LEASE
    assert not await handed_flag(pool, made)


async def test_a_claim_lease_shorter_than_the_confirm_time_bounds_a_handed_jobs_lease(
    store: Store,
) -> None:
    await idle_claim(store, lease=timedelta(seconds=2))
    made = await store.enqueue(NewJob(type="ping"))
    assert made.lease_expires_at is not None
    assert made.lease_expires_at - made.created_at == timedelta(seconds=2)


async def test_a_confirmation_after_the_job_went_to_another_worker_is_refused_and_it_runs_once(
    store: Store,
) -> None:
    await idle_claim(store, offer=HandoffOffer(channel=CHANNEL, ttl=LEASE, confirm_within=SHORT))
    made = await store.enqueue(NewJob(type="ping", max_attempts=1))
    assert made.state is JobState.LEASED
    back = await reaped_back(store, made)
    assert (back.state, back.attempts) == (JobState.QUEUED, 0)  # its only attempt is left
    (again,) = await store.claim(["default"], "worker-b", 5, LEASE)
    assert (again.id, again.attempts) == (made.id, 1)
    # The handed job reaches its worker only now: the confirmation keeps
    # nothing, and the attempt it would report is refused.
    assert await store.heartbeat(OWNER, [made], LEASE) == set()
    (late,) = await store.record_outcomes(OWNER, [Outcome(job=made, kind=OutcomeKind.COMPLETE)])
    assert isinstance(late, LeaseLost)
    done = await store.complete(again, "worker-b")
    assert (done.state, done.attempts) == (JobState.SUCCEEDED, 1)
    assert [(e.kind, e.owner) for e in await store.events(made.id)] == [
        ("enqueued", None),
        ("claimed", OWNER),
        ("reaped", None),
        ("claimed", "worker-b"),
        ("succeeded", "worker-b"),
    ]


async def test_a_worker_stops_a_handed_job_whose_confirmation_is_refused(
    store: Store, pool: Pool, db_url: str, listener: psycopg.AsyncConnection[Any]
) -> None:
    # The notification of a handed job reaches its worker only after the
    # job's short lease ran out and another worker claimed it (a stalled
    # worker, a slow network). The worker starts it, but its confirmation is
    # refused, so it stops the run long before its first heartbeat (20 s).
    from tests.integration.test_worker import make_worker, running

    from jobrun.postgres.notify import Notifier
    from jobrun.registry import JobContext, Registry

    owner = "late-worker"
    offer = HandoffOffer(channel=CHANNEL, ttl=LEASE, confirm_within=SHORT)
    await store.claim(["default"], owner, 5, LEASE, offer=offer)
    made = await store.enqueue(NewJob(type="slow"))
    ((_, note),) = await notes(listener)
    await reaped_back(store, made)
    (again,) = await store.claim(["default"], "worker-b", 5, LEASE)

    reg = Registry()
    started, stopped = asyncio.Event(), asyncio.Event()

    @reg.handler("slow")
    async def slow(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    async with Notifier(db_url) as notifier:
        worker = make_worker(
            store,
            reg,
            dispatcher=notifier,
            owner=owner,
            lease=timedelta(seconds=60),
            heartbeat_every=timedelta(seconds=20),
            poll=timedelta(seconds=30),
        )
        async with running(worker):

            async def offering() -> bool:
                return any(o.channel == notifier.handoff_channel for o in await store.offers())

            await eventually(offering)
            async with pool.connection() as conn:
                await conn.execute("SELECT pg_notify(%s, %s)", (notifier.handoff_channel, note))
            await asyncio.wait_for(started.wait(), 10)
            await asyncio.wait_for(stopped.wait(), 10)
    job = await store.get(made.id)
    assert (job.state, job.lease_owner, job.attempts) == (JobState.LEASED, "worker-b", 1)
    assert [(e.kind, e.owner) for e in await store.events(made.id)] == [
        ("enqueued", None),
        ("claimed", owner),
        ("reaped", None),
        ("claimed", "worker-b"),
    ]  # the late worker's stopped run recorded nothing
    done = await store.complete(again, "worker-b")
    assert done.state is JobState.SUCCEEDED
