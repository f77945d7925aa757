"""SyncProducer: the generated sync store, opened from a connection string.

Sync services (Django, Flask, scripts) enqueue and inspect jobs through
:class:`~jobrun.postgres.store_sync.SyncStore`, which is generated from the
async store and so runs the same SQL and the same I/O-free logic. What a sync
caller also wants is a one-liner that opens a small pool of its own and closes
it at the end; that lifecycle, and nothing of the store's behaviour, is all
this module adds.

``enqueue(job, conn=connection)`` joins the caller's open transaction on a
sync ``psycopg.Connection`` (as a savepoint, or as its first statement), so
the job and its notification commit with the caller's own rows or not at all.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from psycopg_pool import ConnectionPool
from pydantic import BaseModel

from jobrun.domain import notify_channel_problem
from jobrun.errors import ConfigurationError
from jobrun.postgres import preparing
from jobrun.postgres.pool import DEFAULT_CONNECT_TIMEOUT, SyncPool, open_sync_pool
from jobrun.postgres.store_sync import DEFAULT_NOTIFY_CHANNEL, SyncStore

__all__ = ["SyncProducer"]

log = logging.getLogger(__name__)

# Serialises the reopening of producers' pools after a fork; itself new in
# every child, so a fork taken while a thread held it cannot deadlock.
_reopening = threading.Lock()


def _new_reopening_lock() -> None:
    global _reopening
    _reopening = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_reopening_lock)


class SyncProducer(SyncStore):
    """A :class:`~jobrun.postgres.store_sync.SyncStore` that can own its pool.

    Give it a connection string (it opens and later closes a small pool of
    its own, ``max_pool_size`` connections) or an open
    ``psycopg_pool.ConnectionPool`` (which the caller keeps and closes).
    ``notify_channel``, ``payload_models``, ``job_types`` and
    ``max_payload_bytes`` mean what they mean on the async Store, and the
    channel must match the workers' for notifications to wake them.
    ``pgbouncer=True`` when the connection string is PgBouncer in transaction
    mode (see :func:`~jobrun.postgres.open_sync_pool`).

    Use it as a context manager, or call :meth:`close`.

    A producer opened from a connection string survives ``os.fork()``: a
    child that uses it (a gunicorn worker of an app loaded with
    ``--preload``, a multiprocessing child) opens a pool of its own, and
    never touches the parent's connections. A pool passed in cannot be
    replaced, so using it in a fork raises UsageError.
    """

    def __init__(
        self,
        conninfo_or_pool: str | SyncPool,
        *,
        notify_channel: str = DEFAULT_NOTIFY_CHANNEL,
        payload_models: Mapping[str, type[BaseModel]] | None = None,
        max_payload_bytes: int = preparing.DEFAULT_MAX_PAYLOAD_BYTES,
        job_types: Iterable[str] | None = None,
        max_pool_size: int = 4,
        connect_timeout: timedelta = DEFAULT_CONNECT_TIMEOUT,
        pgbouncer: bool = False,
    ) -> None:
        # Refuse bad settings before a pool is opened (and would need closing).
        channel_problem = notify_channel_problem(notify_channel)
        if channel_problem is not None:
            raise ConfigurationError(channel_problem)
        if max_payload_bytes < 1:
            raise ConfigurationError("max_payload_bytes must be positive")
        if isinstance(conninfo_or_pool, str):
            self._pool_args: dict[str, Any] = dict(
                url=conninfo_or_pool,
                max_size=max_pool_size,
                connect_timeout=connect_timeout,
                pgbouncer=pgbouncer,
            )
            pool = open_sync_pool(**self._pool_args)
            self._owns_pool = True
        elif isinstance(conninfo_or_pool, ConnectionPool):
            pool = conninfo_or_pool
            self._owns_pool = False
        else:
            raise ConfigurationError(
                "SyncProducer needs a connection string or a psycopg_pool.ConnectionPool"
            )
        super().__init__(
            pool,
            notify_channel=notify_channel,
            payload_models=payload_models,
            max_payload_bytes=max_payload_bytes,
            job_types=job_types,
        )

    def _forked(self) -> None:
        if not self._owns_pool:
            super()._forked()
        with _reopening:
            if self._pid == os.getpid():  # another thread of this process reopened it
                return
            # The inherited pool is dropped, not closed: closing would end the
            # parent's sessions, which share its sockets. psycopg's finalizers
            # never end a session from a process other than the one that opened it.
            self._pool = open_sync_pool(**self._pool_args)
            self._pid = os.getpid()
            log.info("SyncProducer: opened a pool of this process's own after a fork")

    def close(self) -> None:
        """Close the pool if this producer opened it; a pool passed in stays open.

        In a forked child that never used the producer, the pool is still the
        parent's and is left alone.
        """
        if self._owns_pool and self._pid == os.getpid():
            self._pool.close()

    def __enter__(self) -> SyncProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
