"""Advisory locks: leader election on session locks, and key locks inside transactions.

:func:`lock_keys` takes transaction-scoped locks on application keys in the
one global order jobrun's completer uses (see
:meth:`jobrun.registry.JobContext.lock`), for your own transactions.

:class:`AdvisoryLocker` implements the :class:`~jobrun.ports.Locker` port: a
lock is ``pg_try_advisory_lock(key)`` taken on a connection opened for that
lock alone, outside the pool. The server releases a session lock the moment
its session ends, so whatever kills the holder (a crash, ``kill -9``, a
network cut, ``pg_terminate_backend``) frees the key for another process
without any timeout of ours.

The holder must learn it too, or two processes would both believe they lead.
Each :class:`AdvisoryLock` handle runs a watcher that probes its connection
every ``probe_every`` seconds (a query that also checks the lock is still in
``pg_locks`` for this session); a failed or negative probe flips
:attr:`~AdvisoryLock.lost` and completes :meth:`~AdvisoryLock.wait_lost`. A
holder therefore learns of a loss within ``probe_every`` seconds plus one
round trip; anything it does in that window must be safe to do twice (the
scheduler's idempotency keys are).

Behind PgBouncer in transaction mode a session lock is not safe: the bouncer
hands the server connection that took it to other clients between
transactions, so the lock would stay with a connection its holder no longer
uses (and nobody would release it). With ``transaction_scoped=True`` the
locker instead takes ``pg_try_advisory_xact_lock`` and keeps that transaction
open for as long as it holds the lock: an open transaction pins its server
connection to the client, so the lock lives and dies with the holder's
connection exactly as a session lock does on a direct one. The watcher's
probes run inside that transaction, so it never idles long enough for an
``idle_in_transaction_session_timeout`` (or PgBouncer's
``idle_transaction_timeout``) to end it, while a holder that vanished stops
probing and is cut off by those timeouts. The probes have no parameters, so
they go in the simple protocol and leave no portal (and no snapshot) behind:
between probes the transaction has no xmin, and however long it leads it holds
back no vacuum. Each held lock keeps one server connection of the bouncer's
pool busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import psycopg

from jobrun.domain import key_lock_id
from jobrun.durations import positive_seconds
from jobrun.errors import ConfigurationError
from jobrun.outages import process_outages
from jobrun.postgres.pool import unavailable_error
from jobrun.sqlc.locks import AsyncQuerier

__all__ = ["AdvisoryLock", "AdvisoryLocker", "lock_keys"]

log = logging.getLogger(__name__)

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


class AdvisoryLock:
    """A held advisory lock (the :class:`~jobrun.ports.LockHandle` port).

    Owns its connection; :meth:`release` (or a loss) closes it. A
    ``transaction_scoped`` lock lives in the connection's open transaction and
    is released by ending it.
    """

    def __init__(
        self,
        conn: psycopg.AsyncConnection[Any],
        key: int,
        *,
        probe_every: timedelta,
        transaction_scoped: bool = False,
    ) -> None:
        self._conn = conn
        self._key = key
        self._transaction_scoped = transaction_scoped
        self._probe_every = positive_seconds("probe_every", probe_every)
        self._lost = asyncio.Event()
        self._stop = asyncio.Event()
        self._released = False
        self._watcher = asyncio.create_task(self._watch(), name=f"jobrun-lock-{key}")

    @property
    def key(self) -> int:
        """The advisory lock key."""
        return self._key

    @property
    def lost(self) -> bool:
        """True once the lock is no longer held by this handle (lost or released)."""
        return self._lost.is_set()

    async def wait_lost(self) -> None:
        """Return when the lock is lost, or released."""
        await self._lost.wait()

    async def release(self) -> None:
        """Give the lock up and close its connection. Idempotent."""
        if self._released:
            return
        self._released = True
        # Stop the watcher between probes rather than cancelling one mid-query.
        self._stop.set()
        await self._watcher
        if not self._lost.is_set():
            with contextlib.suppress(psycopg.Error):
                if self._transaction_scoped:
                    await self._conn.rollback()
                else:
                    await AsyncQuerier(self._conn).advisory_unlock(key=self._key)
        self._lost.set()
        with contextlib.suppress(psycopg.Error):
            await self._conn.close()

    async def _watch(self) -> None:
        querier = AsyncQuerier(self._conn)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._probe_every):
                    await self._stop.wait()
            if self._stop.is_set():
                return
            try:
                if self._transaction_scoped:
                    held = await querier.advisory_lock_held_any()
                else:
                    held = await querier.advisory_lock_held(key=self._key)
            except psycopg.Error as exc:
                reason = " ".join(str(exc).split()) or type(exc).__name__
                # The lock's own connection is probed only now and then, so it
                # may find the server gone long after the outage began (or
                # ended): it does not announce one, and says its loss quietly
                # while the process is in one.
                outage = isinstance(exc, psycopg.OperationalError) and process_outages().down
                self._mark_lost(f"its connection failed: {reason}", quietly=outage)
                break
            if not held:
                self._mark_lost("the session no longer holds it")
                break
        with contextlib.suppress(psycopg.Error):
            await self._conn.close()

    def _mark_lost(self, reason: str, *, quietly: bool = False) -> None:
        # Lost to a database outage, the process has said why (jobrun.outages).
        log.log(
            logging.DEBUG if quietly else logging.WARNING,
            "advisory lock %d lost: %s",
            self._key,
            reason,
        )
        self._lost.set()


class AdvisoryLocker:
    """The :class:`~jobrun.ports.Locker` port on ``pg_try_advisory_lock``.

    Every acquired lock gets its own connection, named ``application_name``
    in ``pg_stat_activity`` so operators can see who leads. ``url`` should
    reach the server directly; through PgBouncer in transaction mode pass
    ``transaction_scoped=True`` (see the module's docstring).
    """

    def __init__(
        self,
        url: str,
        *,
        application_name: str = "jobrun-locker",
        probe_every: timedelta = timedelta(seconds=1),
        connect_timeout: timedelta = timedelta(seconds=10),
        transaction_scoped: bool = False,
    ) -> None:
        positive_seconds("probe_every", probe_every)
        self._connect_seconds = positive_seconds("connect_timeout", connect_timeout)
        self._url = url
        self._transaction_scoped = transaction_scoped
        self._application_name = application_name
        self._probe_every = probe_every

    @property
    def transaction_scoped(self) -> bool:
        """True when locks are transaction-level, held in an open transaction (PgBouncer)."""
        return self._transaction_scoped

    @property
    def probe_every(self) -> timedelta:
        """The time between a held lock's liveness probes: the bound on noticing a loss."""
        return self._probe_every

    async def try_acquire(self, key: int) -> AdvisoryLock | None:
        """Take lock ``key`` if no other session holds it; ``None`` when one does.

        Raises :class:`~jobrun.errors.DatabaseUnavailable` when the server
        cannot be reached.
        """
        if not _INT64_MIN <= key <= _INT64_MAX:
            raise ConfigurationError(f"advisory lock key {key} does not fit a bigint")
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._url,
                # Transaction-scoped: the first query opens the transaction that holds the lock.
                autocommit=not self._transaction_scoped,
                # Never a server-side prepared statement: a bouncer may not keep them.
                prepare_threshold=None,
                application_name=self._application_name,
                connect_timeout=max(1, round(self._connect_seconds)),
                keepalives=1,
                keepalives_idle=5,
                keepalives_interval=2,
                keepalives_count=3,
            )
        except psycopg.OperationalError as exc:
            raise unavailable_error(self._url, str(exc)) from None
        try:
            querier = AsyncQuerier(conn)
            if self._transaction_scoped:
                acquired = await querier.advisory_xact_lock_try(key=key)
                if acquired:
                    # Drops the try's portal and its snapshot (see the probe's query).
                    await querier.advisory_lock_held_any()
            else:
                acquired = await querier.advisory_lock_try(key=key)
        except psycopg.OperationalError as exc:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
            raise unavailable_error(self._url, str(exc)) from None
        except BaseException:
            await conn.close()
            raise
        if not acquired:
            if self._transaction_scoped:
                # Ended cleanly, the bouncer keeps the server connection for
                # others; closed mid-transaction, it would have to drop it.
                with contextlib.suppress(psycopg.Error):
                    await conn.rollback()
            await conn.close()
            return None
        log.debug("advisory lock %d acquired", key)
        return AdvisoryLock(
            conn, key, probe_every=self._probe_every, transaction_scoped=self._transaction_scoped
        )


if TYPE_CHECKING:
    from jobrun.ports import Locker, LockHandle

    def _implements_ports(
        locker: AdvisoryLocker, handle: AdvisoryLock
    ) -> tuple[Locker, LockHandle]:
        return locker, handle


async def lock_keys(conn: psycopg.AsyncConnection[Any], *keys: str) -> None:
    """Take transaction-scoped locks on application ``keys`` on ``conn``, in the global order.

    The same locks, in the same order, that a commit callback gets by
    declaring its keys with :meth:`jobrun.registry.JobContext.lock`; use it in
    your own transactions that touch the same shared state (a producer, an
    admin script), so they serialise with the workers' callbacks instead of
    racing them. The locks end with ``conn``'s transaction, which must be open.
    """
    ids = sorted({key_lock_id(key) for key in keys})
    if ids:
        await AsyncQuerier(conn).key_lock_many(ids=ids)
