"""The synchronous composition root: jobrun for a sync service, from the same ``Config``.

A Django or Flask service, a script or a management command produces jobs
without an event loop. :class:`SyncClient` is :class:`~jobrun.client.Client`'s
producing half for them, built from the same :class:`~jobrun.config.Config`
(so ``JOBRUN_*`` variables configure both alike, and the notification channel
is the workers' by construction): it resolves the database (the embedded
server when none is configured), opens a small pool of its own, and hands out
the generated sync store through a :class:`~jobrun.postgres.SyncProducer`::

    with SyncClient(registry) as jobs:
        jobs.enqueue(NewJob(type="mail.welcome", payload={"user_id": 7}))
        with connection.transaction():          # your own psycopg connection
            ...                                  # your rows
            jobs.enqueue(job, conn=connection)   # commits with them, or not at all

Workers are async: run them with :class:`~jobrun.client.Client` or
``jobrun worker``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, Unpack
from uuid import UUID

from jobrun.config import Config
from jobrun.domain import Job, JobOptions, NewJob
from jobrun.errors import ConfigurationError, IdempotencyConflict
from jobrun.postgres import SyncProducer, resolve_database_url
from jobrun.registry import Registry, registry_given
from jobrun.results import result_sync

__all__ = ["SyncClient"]

DEFAULT_POOL_SIZE = 4
"""Connections a sync client's pool opens at most: a producer needs few."""


class SyncClient:
    """jobrun's producing side for synchronous code, from one :class:`Config`.

    ``registry`` gives the payload models enqueued payloads are validated
    against and the job options its handlers declare, which fill the fields
    a job leaves unset (optional). Settings are a ``config`` or keyword arguments of
    :class:`Config`; ``JOBRUN_*`` variables fill in the rest. Use it as a
    context manager, or call :meth:`open` and :meth:`close`. Safe to share
    between threads, and across ``os.fork()`` (each process opens its own pool).
    """

    def __init__(
        self,
        registry: Registry | None = None,
        config: Config | None = None,
        *,
        max_pool_size: int = DEFAULT_POOL_SIZE,
        **settings: Any,
    ) -> None:
        self.config = Config.given(config, **settings)
        """The settings this client runs with."""
        self.registry = registry_given(registry, "SyncClient")
        """The handlers whose payload models enqueued payloads are checked against."""
        self._max_pool_size = max_pool_size
        self._producer: SyncProducer | None = None

    def open(self) -> SyncClient:
        """Resolve the database (the embedded one when none is configured) and open the pool."""
        if self._producer is None:
            self._producer = SyncProducer(
                resolve_database_url(self.config.database_url),
                notify_channel=self.config.notify_channel,
                payload_models=self.registry.payload_models(),
                max_pool_size=self._max_pool_size,
                pgbouncer=self.config.pgbouncer,
            )
        return self

    def close(self) -> None:
        """Close the pool this client opened."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None

    def __enter__(self) -> SyncClient:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def store(self) -> SyncProducer:
        """The generated sync store (producing and inspecting); the client must be open."""
        if self._producer is None:
            raise ConfigurationError("the client is not open: use `with SyncClient(...)`")
        return self._producer

    def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Enqueue ``job``; with ``conn`` (your open transaction) it commits with your rows.

        Fields the caller did not set take the defaults declared with the
        type's handler in this client's registry.
        """
        return self.store.enqueue(self.registry.with_defaults(job), conn=conn)

    def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Enqueue many jobs in one transaction; one result per input, in order.

        Each job takes its type's declared defaults, as :meth:`enqueue` does.
        """
        if self.registry:
            jobs = [self.registry.with_defaults(job) for job in jobs]
        return self.store.enqueue_batch(jobs, conn=conn)

    def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Enqueue one job of ``job_type`` per payload, alike in all else; their ids, in order.

        ``options`` are the fields the jobs share (:class:`~jobrun.domain.JobOptions`),
        as :meth:`jobrun.postgres.SyncStore.enqueue_many` takes them; those not
        given take the ones declared with the type's handler. A type whose
        handler declares an idempotency key is refused with InvalidJob, since
        jobs enqueued alike carry none (use :meth:`enqueue_batch`).
        """
        # The options given win over the defaults declared with the handler.
        merged = self.registry.options_for_many(job_type, options)
        return self.store.enqueue_many(job_type, payloads, conn=conn, **merged)

    def get(self, job_id: UUID) -> Job:
        """The job with ``job_id`` as stored now; JobNotFound when there is none."""
        return self.store.get(job_id)

    def result(
        self, job_id: UUID | str, *, wait: timedelta | float | None = None, model: Any = None
    ) -> Any:
        """What ``job_id``'s handler returned; :meth:`jobrun.Client.result`, for sync code.

        A wait polls (every 50 ms at first, then up to every second) instead
        of listening; the errors and the typing of the value are the same.
        """
        return result_sync(self.store, self.registry, job_id, wait=wait, model=model)
