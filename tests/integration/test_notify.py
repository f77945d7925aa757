"""Notifier (the Dispatcher port) over real LISTEN/NOTIFY on a real server."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import psycopg
import pytest

from jobrun.domain import HandoffOffer, Job, NewJob
from jobrun.ports import Dispatcher, HandoffReceiver
from jobrun.postgres import Store
from jobrun.postgres.notify import Notifier
from jobrun.postgres.pool import open_pool
from jobrun.testing import eventually

# Tests send notifications with plain pg_notify, as a producer's transaction would.
NOTIFY = "SELECT pg_notify(%s, %s)"


@pytest.fixture
def app_name() -> str:
    return f"jobrun-notifier-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def notifier(db_url: str, app_name: str) -> AsyncIterator[Notifier]:
    n = await Notifier.start(
        db_url,
        "jobrun",
        application_name=app_name,
        reconnect_initial=timedelta(milliseconds=20),
        reconnect_max=timedelta(milliseconds=200),
    )
    try:
        yield n
    finally:
        await n.close()


@pytest.fixture
async def producer(db_url: str) -> AsyncIterator[psycopg.AsyncConnection[object]]:
    conn = await psycopg.AsyncConnection.connect(db_url, autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


async def notify(
    conn: psycopg.AsyncConnection[object], queue: str, channel: str = "jobrun"
) -> None:
    async with conn.transaction():
        await conn.execute(NOTIFY, (channel, queue))


async def terminate(db_url: str, app_name: str) -> int:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            (app_name,),
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def caught_up(notifier: Notifier, conn: psycopg.AsyncConnection[object]) -> None:
    """Return once ``notifier`` has dispatched everything committed on ``conn`` before now.

    A marker queue's notification is sent last and awaited: notifications from one
    connection arrive in commit order, so anything sent before it (or committed by
    another session before it) has been dispatched by then. A test asserting that
    something did *not* wake a waiter checks after this, instead of waiting a while.
    """
    marker = notifier.subscribe([f"marker-{uuid.uuid4().hex}"])
    try:
        await notify(conn, next(iter(marker.queues)))
        assert await marker.wait(timeout=timedelta(seconds=10)) is True
    finally:
        marker.close()


def test_notifier_is_a_dispatcher() -> None:
    assert issubclass(Notifier, Dispatcher)


async def test_committed_notify_wakes_waiter(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    # Register the waiter's subscription first, so the notification cannot
    # arrive before the task below has subscribed.
    assert await notifier.wait(["default"], timeout=timedelta(0)) is False
    waiter = asyncio.create_task(notifier.wait(["default"], timeout=timedelta(seconds=5)))
    await notify(producer, "default")
    assert await asyncio.wait_for(waiter, 10) is True


async def test_nothing_wakes_before_commit(
    db_url: str, notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    sub = notifier.subscribe(["default"])
    async with (
        await psycopg.AsyncConnection.connect(db_url, autocommit=True) as other,
        producer.transaction(),
    ):
        await producer.execute(NOTIFY, ("jobrun", "default"))
        await caught_up(notifier, other)  # committed after the NOTIFY was sent
        assert await sub.wait(timeout=timedelta(0)) is False
    assert await sub.wait(timeout=timedelta(seconds=10)) is True


async def test_rolled_back_notify_wakes_nobody(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    sub = notifier.subscribe(["default"])
    await producer.execute("BEGIN")
    await producer.execute(NOTIFY, ("jobrun", "default"))
    await producer.execute("ROLLBACK")
    await caught_up(notifier, producer)
    assert await sub.wait(timeout=timedelta(0)) is False


async def test_notifications_while_busy_coalesce_into_one_wakeup(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    sub = notifier.subscribe(["default"])
    for _ in range(10):
        await notify(producer, "default")
    await caught_up(notifier, producer)  # the waiter is "busy": nobody waits while these arrive
    assert await sub.wait(timeout=timedelta(seconds=10)) is True
    assert await sub.wait(timeout=timedelta(0)) is False


async def test_port_wait_keeps_pending_wakeup_between_calls(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    assert await notifier.wait(["default"], timeout=timedelta(0)) is False  # registers the waiter
    for _ in range(5):
        await notify(producer, "default")
    await caught_up(notifier, producer)
    assert await notifier.wait(["default"], timeout=timedelta(seconds=0)) is True
    assert await notifier.wait(["default"], timeout=timedelta(seconds=0)) is False


async def test_each_waiter_has_its_own_slot(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    first = notifier.subscribe(["default"])
    second = notifier.subscribe(["default"])
    await notify(producer, "default")
    assert await first.wait(timeout=timedelta(seconds=10)) is True
    assert await second.wait(timeout=timedelta(seconds=10)) is True


async def test_queues_are_isolated(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    emails = notifier.subscribe(["emails"])
    both = notifier.subscribe(["emails", "reports"])
    reports = notifier.subscribe(["reports"])
    await notify(producer, "reports")
    assert await reports.wait(timeout=timedelta(seconds=10)) is True
    assert await both.wait(timeout=timedelta(seconds=10)) is True
    # Dispatch wakes every subscription of the queue at once: "reports" is dispatched.
    assert await emails.wait(timeout=timedelta(0)) is False


async def test_other_channel_is_ignored(
    notifier: Notifier, producer: psycopg.AsyncConnection[object]
) -> None:
    sub = notifier.subscribe(["default"])
    await notify(producer, "default", channel="someone_else")
    await caught_up(notifier, producer)
    assert await sub.wait(timeout=timedelta(0)) is False


async def test_channel_name_is_quoted_as_identifier(
    db_url: str, producer: psycopg.AsyncConnection[object]
) -> None:
    channel = 'Mixed Case; DROP TABLE jobs; --"'
    async with Notifier(db_url, channel) as n:
        sub = n.subscribe(["q"])
        await notify(producer, "q", channel=channel)
        assert await sub.wait(timeout=timedelta(seconds=10)) is True


async def test_timeout_returns_false(notifier: Notifier) -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await notifier.wait(["default"], timeout=timedelta(seconds=0.2)) is False
    # At least the timeout; the upper bound only tells "returned on its own
    # timeout" from "hung", with room for a loaded machine.
    assert 0.15 <= loop.time() - started < 5.0


async def test_reconnects_after_terminate_and_wakes_every_waiter_once(
    db_url: str,
    app_name: str,
    notifier: Notifier,
    producer: psycopg.AsyncConnection[object],
) -> None:
    first = notifier.subscribe(["a"])
    second = notifier.subscribe(["b"])
    assert await terminate(db_url, app_name) == 1
    # Both waiters get exactly one wake-up for the gap, without any notification.
    assert await first.wait(timeout=timedelta(seconds=5)) is True
    assert await second.wait(timeout=timedelta(seconds=5)) is True
    assert notifier.reconnects == 1
    assert notifier.connected
    await caught_up(notifier, producer)
    assert await first.wait(timeout=timedelta(0)) is False
    # And notifications flow again on the new connection.
    await notify(producer, "a")
    assert await first.wait(timeout=timedelta(seconds=10)) is True
    assert await second.wait(timeout=timedelta(0)) is False


async def test_keeps_retrying_while_server_refuses_then_recovers(
    db_url: str,
    app_name: str,
    notifier: Notifier,
    producer: psycopg.AsyncConnection[object],
) -> None:
    sub = notifier.subscribe(["default"])
    # Kill the listener repeatedly: each new connection dies as soon as it is there.
    for _ in range(5):
        await eventually(lambda: terminate(db_url, app_name), what="a listener to kill")
    assert await notifier.wait_connected(timeout=timedelta(seconds=5))
    assert await sub.wait(timeout=timedelta(seconds=5)) is True  # woken for the gap
    # The marker arrives (or a last reconnect wakes it) only once listening again.
    await caught_up(notifier, producer)
    # Drain: a reconnect may have completed after our last wait.
    await sub.wait(timeout=timedelta(seconds=0))
    await notify(producer, "default")
    assert await sub.wait(timeout=timedelta(seconds=10)) is True


async def test_start_with_unreachable_server_raises_database_unavailable() -> None:
    from jobrun.errors import DatabaseUnavailable

    with pytest.raises(DatabaseUnavailable) as info:
        await Notifier.start(
            "postgresql://u:secret@127.0.0.1:1/nowhere", connect_timeout=timedelta(seconds=2)
        )
    assert "secret" not in str(info.value)


async def test_close_is_idempotent(db_url: str) -> None:
    n = await Notifier.start(db_url)
    await n.close()
    await n.close()
    assert not n.connected


# -- handoff: whole jobs on the notifier's own channel ----------------------------------


def test_notifier_receives_handoffs() -> None:
    assert issubclass(Notifier, HandoffReceiver)


async def handed_job(db_url: str, notifier: Notifier, owner: str) -> Job:
    """Offer one slot as ``owner`` on the notifier's channel, then enqueue a job due now."""
    pool = await open_pool(db_url, worker_concurrency=1)
    try:
        store = Store(pool)
        offer = HandoffOffer(channel=notifier.handoff_channel, ttl=timedelta(seconds=30))
        await store.claim(["default"], owner, 1, timedelta(seconds=30), offer=offer)
        return await store.enqueue(NewJob(type="ping", payload={"n": 1}))
    finally:
        await pool.close()


async def test_a_handed_job_reaches_its_owners_inbox_whole(db_url: str, notifier: Notifier) -> None:
    got: list[Job] = []
    inbox = notifier.receive_handoffs("w1", got.append)
    notifier.receive_handoffs("w2", lambda job: pytest.fail(f"w2 got {job}"))
    assert inbox.channel == notifier.handoff_channel and inbox.ready
    made = await handed_job(db_url, notifier, "w1")
    await eventually(lambda: got, what="the handed job")
    assert got == [made]


async def test_a_job_handed_to_a_closed_inbox_or_unreadable_is_dropped_with_a_log_line(
    db_url: str,
    notifier: Notifier,
    producer: psycopg.AsyncConnection[object],
    caplog: pytest.LogCaptureFixture,
) -> None:
    got: list[Job] = []
    inbox = notifier.receive_handoffs("w1", got.append)
    inbox.close()
    caplog.set_level(logging.INFO, logger="jobrun.postgres.notify")
    await handed_job(db_url, notifier, "w1")
    await notify(producer, "{not json", channel=notifier.handoff_channel)
    # Both log lines mean both notes were read and dropped.
    await eventually(
        lambda: "no longer receives" in caplog.text and "unreadable handed job" in caplog.text
    )
    assert got == []
    assert "no longer receives" in caplog.text
    assert "unreadable handed job" in caplog.text


async def test_an_inbox_is_not_ready_while_the_connection_is_down(
    db_url: str,
    pg_admin_url: str,
    app_name: str,
    notifier: Notifier,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A worker offers slots only while its inbox is ready: a job handed over
    # a dropped connection would wait for its lease to run out.
    # DEBUG: during an outage the notifier's tries are logged there (jobrun.outages).
    caplog.set_level(logging.DEBUG, logger="jobrun.postgres.notify")
    got: list[Job] = []
    inbox = notifier.receive_handoffs("w1", got.append)
    assert inbox.ready
    # The database refuses new connections, so the notifier stays down
    # (it would otherwise be back within milliseconds) until it allows them.
    dbname = psycopg.conninfo.conninfo_to_dict(db_url)["dbname"]
    async with await psycopg.AsyncConnection.connect(pg_admin_url, autocommit=True) as admin:
        refuse = f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS '
        await admin.execute(refuse + "false")
        try:
            cur = await admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE application_name = %s AND datname = %s",
                (app_name, dbname),
            )
            assert await cur.fetchone() == (1,)
            await eventually(lambda: not inbox.ready, what="the inbox not ready")
            # Two refused reconnects: the notifier tried and is still down.
            await eventually(lambda: caplog.text.count("reconnect to channel") >= 2)
            assert not inbox.ready  # still down: a worker would offer nothing
        finally:
            await admin.execute(refuse + "true")
    assert await notifier.wait_connected(timedelta(seconds=10))
    assert inbox.ready
    # The new connection listens on the handoff channel again.
    made = await handed_job(db_url, notifier, "w1")
    await eventually(lambda: got, what="the handed job")
    assert got == [made]


async def test_the_handoff_channel_fits_whatever_the_wake_up_channel(db_url: str) -> None:
    # A 63-character wake-up channel of multibyte characters is as long as a
    # channel may be; the handoff channel must stay a valid one of its own.
    channel = "ü" * 31
    async with Notifier(db_url, channel) as n:
        got: list[Job] = []
        n.receive_handoffs("w1", got.append)
        assert len(n.handoff_channel.encode()) <= 63
        made = await handed_job(db_url, n, "w1")
        await eventually(lambda: got, what="the handed job")
        assert got == [made]
