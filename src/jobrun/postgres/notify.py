"""Wake idle workers the moment a job is enqueued, over LISTEN/NOTIFY.

Producers call ``pg_notify(channel, queue)`` inside the transaction that writes
the job, so PostgreSQL delivers the notification only at commit: a worker can
never wake before the row is visible, and a rolled-back enqueue wakes nobody.
This module is the receiving end: the :class:`Notifier` implements the
:class:`~jobrun.ports.Dispatcher` port, and :class:`~jobrun.ports.HandoffReceiver`:
on a second channel of its own it receives whole jobs that an enqueue leased
straight to one of its idle workers (see :class:`~jobrun.domain.HandoffOffer`).

Invariants:

* One dedicated connection (autocommit, outside the pool) LISTENs for the whole
  process. A reader task consumes psycopg's ``notifies()`` generator, so a
  notification is dispatched as soon as its packet arrives: no polling.
* Each waiter (a :class:`Subscription`, one per queue set) has a one-slot
  signal. Notifications that arrive while it is busy leave a single pending
  wake-up, not a pile of them.
* Notifications are only a latency optimisation; workers also poll. When the
  connection drops, the notifier reconnects with capped exponential backoff
  and then wakes every waiter once, since a notification may have been lost
  in the gap. Nothing a caller does ever fails because the listener is down.
* A handed job lost in such a gap is not lost: it stays leased to its worker
  only until the short lease a handoff gives runs out (its worker confirms
  the jobs it receives, see :mod:`jobrun._confirm`), and the reaper then
  gives it back, due now and its attempt not counted. Workers offer slots
  only while the connection is up, which keeps that gap to the moments
  before a drop is noticed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from jobrun.domain import Job, notify_channel_problem
from jobrun.durations import positive_seconds
from jobrun.errors import ConfigurationError, UsageError
from jobrun.outages import process_outages
from jobrun.postgres.convert import job_from_handoff
from jobrun.postgres.pool import unavailable_error

__all__ = ["DEFAULT_CHANNEL", "HandoffInbox", "Notifier", "Subscription"]

DEFAULT_CHANNEL = "jobrun"
"""The channel producers notify and the notifier listens on, unless configured."""

log = logging.getLogger(__name__)


class Subscription:
    """A waiter's one-slot wake-up signal for a fixed set of queues.

    A notification for any of the queues sets the slot; :meth:`wait` consumes
    it. However many notifications arrive while the owner is busy, the next
    :meth:`wait` returns at once, exactly one time.
    """

    def __init__(self, notifier: Notifier, queues: frozenset[str]) -> None:
        self._notifier = notifier
        self._queues = queues
        self._signal = asyncio.Event()

    @property
    def queues(self) -> frozenset[str]:
        """The queues whose notifications wake this subscription."""
        return self._queues

    async def wait(self, timeout: timedelta) -> bool:  # noqa: ASYNC109 - mirrors the port
        """Wait for a notification of one of the queues; False once ``timeout`` passed.

        A wake-up that arrived since the last call is returned immediately.
        """
        if not self._signal.is_set():
            try:
                async with asyncio.timeout(max(timeout.total_seconds(), 0.0)):
                    await self._signal.wait()
            except TimeoutError:
                return False
        self._signal.clear()
        return True

    def close(self) -> None:
        """Stop receiving notifications."""
        self._notifier._unsubscribe(self)

    def _wake(self) -> None:
        self._signal.set()


class HandoffInbox:
    """Where one worker's handed jobs arrive (:class:`~jobrun.ports.HandoffInbox`).

    Every notifier LISTENs, on its one connection, on a handoff channel of its
    own besides the wake-up channel; a job handed to ``owner`` arrives there
    as JSON, and the notifier hands it to the inbox of its lease owner.
    """

    def __init__(self, notifier: Notifier, owner: str, deliver: Callable[[Job], None]) -> None:
        self._notifier = notifier
        self._owner = owner
        self._deliver = deliver

    @property
    def channel(self) -> str:
        """The channel offers name; enqueues send this worker's handed jobs here."""
        return self._notifier.handoff_channel

    @property
    def ready(self) -> bool:
        """Whether the listening connection is up right now."""
        return self._notifier.connected

    def close(self) -> None:
        """Stop receiving: later handed jobs are ignored (their leases run out)."""
        self._notifier._close_inbox(self)


class Notifier:
    """The :class:`~jobrun.ports.Dispatcher` over LISTEN/NOTIFY on one dedicated connection.

    Open it with ``await Notifier.start(url)`` or ``async with Notifier(url)``;
    :meth:`close` stops the reader and closes the connection. The first
    connection must succeed (a wrong URL raises
    :class:`~jobrun.errors.DatabaseUnavailable`); later drops are repaired in
    the background.
    """

    def __init__(
        self,
        url: str,
        channel: str = DEFAULT_CHANNEL,
        *,
        application_name: str = "jobrun-notifier",
        connect_timeout: timedelta = timedelta(seconds=10),
        reconnect_initial: timedelta = timedelta(milliseconds=50),
        reconnect_max: timedelta = timedelta(seconds=5),
    ) -> None:
        problem = notify_channel_problem(channel)
        if problem is not None:
            raise ConfigurationError(problem)
        self._url = url
        self._channel = channel
        self._application_name = application_name
        self._connect_timeout = positive_seconds("connect_timeout", connect_timeout)
        self._reconnect_initial = positive_seconds("reconnect_initial", reconnect_initial)
        self._reconnect_max = positive_seconds("reconnect_max", reconnect_max)
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = False
        self._by_queue: dict[str, set[Subscription]] = {}
        self._by_queue_set: dict[frozenset[str], Subscription] = {}
        self._reconnects = 0
        self._connected = asyncio.Event()
        self._inboxes: dict[str, HandoffInbox] = {}
        # Random, so that no two notifiers (processes, hosts) share one, and
        # ASCII whatever the wake-up channel is: a channel name is at most 63
        # bytes, and pg_notify refuses a longer one (failing the enqueue).
        self._handoff_channel = f"jobrun.handoff.{secrets.token_hex(8)}"

    @classmethod
    async def start(cls, url: str, channel: str = DEFAULT_CHANNEL, **options: Any) -> Notifier:
        """Connect, LISTEN and start dispatching; return the running notifier."""
        notifier = cls(url, channel, **options)
        await notifier.open()
        return notifier

    async def open(self) -> None:
        """Connect and LISTEN; raise ``DatabaseUnavailable`` if the server can't be reached."""
        if self._reader is not None:
            return
        if self._closed:
            raise UsageError("the notifier is closed; start a new one")
        try:
            conn = await self._connect()
        except psycopg.OperationalError as exc:
            raise unavailable_error(self._url, str(exc)) from None
        self._conn = conn
        self._connected.set()
        self._reader = asyncio.create_task(self._read(conn), name="jobrun-notifier")

    async def __aenter__(self) -> Notifier:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def channel(self) -> str:
        """The channel this notifier LISTENs on."""
        return self._channel

    @property
    def connected(self) -> bool:
        """Whether the listening connection is currently up."""
        return self._connected.is_set()

    @property
    def reconnects(self) -> int:
        """How many times the connection was re-established after a drop."""
        return self._reconnects

    async def wait_connected(self, timeout: timedelta) -> bool:  # noqa: ASYNC109 - as wait()
        """Wait until the listening connection is up; False once ``timeout`` passed."""
        try:
            async with asyncio.timeout(timeout.total_seconds()):
                await self._connected.wait()
        except TimeoutError:
            return False
        return True

    def subscribe(self, queues: Iterable[str]) -> Subscription:
        """A new waiter for ``queues``, with its own one-slot signal."""
        subscription = Subscription(self, frozenset(queues))
        if not subscription.queues:
            raise ConfigurationError("subscribe to at least one queue")
        for queue in subscription.queues:
            self._by_queue.setdefault(queue, set()).add(subscription)
        return subscription

    async def wait(self, queues: Sequence[str], timeout: timedelta) -> bool:  # noqa: ASYNC109 - the Dispatcher port
        """Wait until one of ``queues`` is notified or ``timeout`` passes.

        Callers passing the same queue set share one subscription, so a
        wake-up that arrived while they were busy is waiting for them.
        """
        key = frozenset(queues)
        subscription = self._by_queue_set.get(key)
        if subscription is None:
            subscription = self._by_queue_set[key] = self.subscribe(key)
        return await subscription.wait(timeout)

    @property
    def handoff_channel(self) -> str:
        """The channel this notifier receives handed jobs on (one per notifier)."""
        return self._handoff_channel

    def receive_handoffs(self, owner: str, deliver: Callable[[Job], None]) -> HandoffInbox:
        """Deliver the jobs handed to ``owner`` (a worker's lease owner) to ``deliver``."""
        inbox = HandoffInbox(self, owner, deliver)
        self._inboxes[owner] = inbox
        return inbox

    def _close_inbox(self, inbox: HandoffInbox) -> None:
        if self._inboxes.get(inbox._owner) is inbox:
            del self._inboxes[inbox._owner]

    def _handed(self, payload: str) -> None:
        try:
            job = job_from_handoff(payload)
        except (ValueError, KeyError, TypeError) as exc:
            # Not a job this version can read: its lease runs out and the
            # reaper gives it back, the attempt not counted.
            log.warning("notifier: unreadable handed job ignored: %s", exc)
            return
        inbox = self._inboxes.get(job.lease_owner or "")
        if inbox is None:
            # Its worker stopped receiving (it is shutting down): the lease
            # runs out and the reaper gives the job back, uncounted.
            log.info(
                "notifier: job %s handed to %s, which no longer receives", job.id, job.lease_owner
            )
            return
        try:
            inbox._deliver(job)
        except Exception:
            # The reader must outlive any receiver's fault; the job stays
            # leased, and its lease running out gives it back uncounted.
            log.exception("notifier: delivering handed job %s failed", job.id)

    async def close(self) -> None:
        """Stop listening and close the connection. Idempotent."""
        self._closed = True
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        conn, self._conn = self._conn, None
        self._connected.clear()
        if conn is not None:
            await conn.close()

    def _unsubscribe(self, subscription: Subscription) -> None:
        for queue in subscription.queues:
            waiters = self._by_queue.get(queue)
            if waiters is not None:
                waiters.discard(subscription)
                if not waiters:
                    del self._by_queue[queue]
        if self._by_queue_set.get(subscription.queues) is subscription:
            del self._by_queue_set[subscription.queues]

    def _dispatch(self, queue: str) -> None:
        for subscription in self._by_queue.get(queue, ()):
            subscription._wake()

    def _wake_all(self) -> None:
        for waiters in self._by_queue.values():
            for subscription in waiters:
                subscription._wake()

    def _listened(self) -> tuple[str, ...]:
        """The channels the connection LISTENs on: wake-ups and this notifier's handoffs."""
        return (self._channel, self._handoff_channel)

    def _dispatch_note(self, channel: str, payload: str) -> None:
        if channel == self._channel:
            self._dispatch(payload)
        elif channel == self._handoff_channel:
            self._handed(payload)

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conn = await psycopg.AsyncConnection.connect(
            self._url,
            autocommit=True,
            application_name=self._application_name,
            connect_timeout=max(1, round(self._connect_timeout)),
            # A silently dead network path must end the read, not hang it forever.
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
        )
        try:
            # LISTEN takes an identifier, not a bind parameter, so it cannot be a
            # sqlc query: the one sanctioned piece of SQL composed in Python.
            for channel in self._listened():
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _read(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        failures = 0
        lost_to_outage = False
        while not self._closed:
            if conn is None:
                try:
                    conn = await self._connect()
                except psycopg.OperationalError as exc:
                    delay = min(self._reconnect_max, self._reconnect_initial * 2**failures)
                    failures += 1
                    # Jitter spreads a fleet of workers reconnecting to one restarted server.
                    delay *= random.uniform(0.5, 1.0)
                    # The server is unreachable: the process says so once (jobrun.outages).
                    process_outages().lost(" ".join(str(exc).split()))
                    lost_to_outage = True
                    log.debug(
                        "notifier: reconnect to channel %r failed (%s); retrying in %.2fs",
                        self._channel,
                        " ".join(str(exc).split()),
                        delay,
                    )
                    await asyncio.sleep(delay)
                    continue
                failures = 0
                self._conn = conn
                self._reconnects += 1
                self._connected.set()
                process_outages().answered()
                log.log(
                    logging.DEBUG if lost_to_outage else logging.INFO,
                    "notifier: listening on channel %r again",
                    self._channel,
                )
                lost_to_outage = False
                # Anything notified while we were away is lost: let everyone look.
                self._wake_all()
            try:
                async for note in conn.notifies():
                    self._dispatch_note(note.channel, note.payload)
            except psycopg.Error as exc:
                reason = " ".join(str(exc).split())
                lost_to_outage = isinstance(exc, psycopg.OperationalError)
                if lost_to_outage:
                    process_outages().lost(reason)
                log.log(
                    logging.DEBUG if lost_to_outage else logging.WARNING,
                    "notifier: connection lost (%s); reconnecting",
                    reason,
                )
            self._connected.clear()
            self._conn = None
            with contextlib.suppress(psycopg.Error):
                await conn.close()
            conn = None


if TYPE_CHECKING:
    from jobrun.ports import Dispatcher, HandoffReceiver
    from jobrun.ports import HandoffInbox as InboxPort

    def _implements_port(notifier: Notifier) -> Dispatcher:
        return notifier

    def _receives_handoffs(notifier: Notifier) -> HandoffReceiver:
        return notifier

    def _inbox_port(inbox: HandoffInbox) -> InboxPort:
        return inbox
