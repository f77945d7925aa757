"""The composition root: one object that opens and wires everything jobrun runs.

A service, a script, ``jobrun worker``, the demo and the benchmark all start
jobrun the same way, so none of them can forget a piece (the first release's
CLI worker forgot the notifier and only polled)::

    async with Client(registry, database_url=url, queues=["mail"]) as client:
        await client.enqueue(NewJob(type="mail.welcome", payload={"user_id": 7}))
        await client.run_worker()            # until SIGTERM / stop
        await client.run_worker(drain=True)  # until nothing is due and nothing runs

:class:`Client` owns the pool (sized for the worker's concurrency), the
store, and while a worker runs the notifier (LISTEN on the store's channel)
and, with ``scheduler=True``, the leader-elected scheduler and, unless
``maintenance=False``, the leader-elected maintenance service that prunes
old jobs, events and ledger rows (:mod:`jobrun.maintenance`). Closing the
client closes all of them. Settings come from one :class:`~jobrun.config.Config`.

Behind PgBouncer in transaction mode (``pgbouncer=True``) the pool goes through
the bouncer and carries no session state, while whatever needs a session of its
own goes to ``direct_url``: the LISTEN connection, the leader locks of the
scheduler, the maintenance service and the queue gauges, and migrations (a
session advisory lock, and statements that cannot run in a transaction).
Without ``direct_url`` the worker polls, leader locks are transaction-scoped
(held in an open transaction, which pins a bouncer server connection; see
:mod:`jobrun.postgres.lock`), and :meth:`Client.migrate` refuses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from datetime import timedelta
from typing import Any, Unpack
from uuid import UUID

from jobrun.config import Config
from jobrun.domain import Job, JobOptions, NewJob, Reconciliation
from jobrun.errors import ConfigurationError, IdempotencyConflict
from jobrun.maintenance import Maintenance
from jobrun.postgres import (
    FinishWatcher,
    Notifier,
    Pool,
    Store,
    database_location,
    open_pool,
    resolve_database_url,
)
from jobrun.postgres.lock import AdvisoryLocker
from jobrun.postgres.migrate import check_schema, migrate
from jobrun.registry import Registry, registry_given
from jobrun.results import ResultWaiter
from jobrun.scheduler import DeclarationRenewal, Scheduler, declare_now
from jobrun.telemetry.hooks import Observer
from jobrun.telemetry.serving import load_metrics, serve_metrics
from jobrun.worker import CompletionStats, Worker

__all__ = ["Client", "load_metrics"]

_log = logging.getLogger("jobrun.client")


def store_for(pool: Pool, config: Config, registry: Registry, observer: Observer | None) -> Store:
    """The Store a client with ``config`` and ``registry`` uses on ``pool``."""
    return Store(
        pool,
        event_mode=config.event_mode,
        commit_timeout=config.commit_timeout,
        retry_jitter=config.retry_jitter,
        notify_channel=config.notify_channel,
        payload_models=registry.payload_models(),
        observer=observer,
        # A registry with handlers is the list of types this application runs:
        # any other type is refused at enqueue instead of dying in a worker.
        job_types=registry if len(registry) else None,
        gc_young_threshold=config.gc_young_threshold,
    )


class Client:
    """jobrun for one service: a pool, a store, and workers built from one :class:`Config`.

    ``registry`` holds the handlers a worker runs (a producer-only client
    needs none). A client whose registry has handlers also checks what it
    enqueues against them: a job type it does not register, or a payload its
    handler's model refuses, raises :class:`~jobrun.errors.InvalidJob` and
    nothing is stored (to enqueue for another application's workers, use a
    client without a registry), and fills in the job options its handlers
    declare (:meth:`jobrun.registry.Registry.with_defaults`) where a job leaves
    them unset. Settings are a ``config`` or keyword arguments of
    :class:`Config` (``database_url=``, ``queues=``, ``concurrency=``, ...);
    either way ``JOBRUN_*`` variables fill in what is not given. Use it as an
    async context manager, or call :meth:`open` and :meth:`close`.
    """

    def __init__(
        self,
        registry: Registry | None = None,
        config: Config | None = None,
        **settings: Any,
    ) -> None:
        self.config = Config.given(config, **settings)
        """The settings this client runs with."""
        self.registry = registry_given(registry, "Client")
        """The handlers its workers run."""
        self._url: str | None = None
        self._pool: Pool | None = None
        self._store: Store | None = None
        self._read_pool: Pool | None = None
        self._reader: Store | None = None
        self._worker: Worker | None = None
        self._metrics: Any = None
        self._metrics_server: Any = None
        self._results = ResultWaiter(
            lambda: self.store, lambda: _open_finish_watcher(self), self.registry
        )

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> Client:
        """Resolve the database (the embedded one when none is configured) and open the pool."""
        if self._pool is not None:
            return self
        config = self.config
        if config.metrics_port is not None and self._metrics is None:
            # Before connecting: a missing extra is a configuration error, said at once.
            self._metrics = load_metrics().PrometheusObserver()
        self._url = resolve_database_url(config.database_url)
        self._pool = await open_pool(
            self._url, worker_concurrency=config.concurrency, pgbouncer=config.pgbouncer
        )
        self._store = store_for(self._pool, config, self.registry, self._metrics)
        if config.read_url is not None:
            try:
                self._read_pool = await open_pool(
                    config.read_url, worker_concurrency=1, name="jobrun-read"
                )
            except BaseException:
                await self.close()
                raise
            self._reader = store_for(self._read_pool, config, self.registry, None)
        return self

    async def close(self) -> None:
        """Close the pool (a worker still running is asked to stop first)."""
        if self._worker is not None:
            with contextlib.suppress(RuntimeError):
                self._worker.request_stop(graceful=False)
        await self._results.close()
        if self._pool is not None:
            await self._pool.close()
        if self._read_pool is not None:
            await self._read_pool.close()
        self._pool = self._store = None
        self._read_pool = self._reader = None

    async def __aenter__(self) -> Client:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- the parts ------------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The PostgreSQL store (every storage port); the client must be open."""
        if self._store is None:
            raise ConfigurationError("the client is not open: use `async with Client(...)`")
        return self._store

    @property
    def reader(self) -> Store:
        """The store reads that may be a little stale go to: on ``read_url``, else :attr:`store`.

        The dashboard's pages, ``jobrun jobs list/show``, ``events`` and
        ``stats`` read through it; every write, claim and lock goes through
        :attr:`store` to the primary. A store on a replica refuses writes
        (PostgreSQL's read-only transaction error); its
        :meth:`~jobrun.postgres.Store.replica_lag` says how far behind it is.
        """
        return self._reader if self._reader is not None else self.store

    @property
    def pool(self) -> Pool:
        """The connection pool (up to ``min(concurrency, 16) + 8``); the client must be open."""
        if self._pool is None:
            raise ConfigurationError("the client is not open: use `async with Client(...)`")
        return self._pool

    @property
    def database_url(self) -> str:
        """The database in use (resolved at open; may be the embedded server's)."""
        if self._url is None:
            raise ConfigurationError("the client is not open: use `async with Client(...)`")
        return self._url

    @property
    def session_url(self) -> str:
        """Where connections that need a session of their own go: ``direct_url``, else the pool's.

        The LISTEN connection, leader locks and migrations use it.
        """
        return self.config.direct_url or self.database_url

    @property
    def listen_url(self) -> str | None:
        """The URL the LISTEN connection uses; None when workers poll only.

        None when ``listen`` is off, or behind PgBouncer without ``direct_url``:
        LISTEN through a transaction-mode bouncer would hear nothing reliably
        (the server connection that listened goes back to the bouncer's pool).
        """
        config = self.config
        if not config.listen or (config.pgbouncer and config.direct_url is None):
            return None
        return self.session_url

    def locker(self, application_name: str = "jobrun-locker") -> AdvisoryLocker:
        """An advisory locker for leader election, on :attr:`session_url`.

        Session locks on a direct connection; transaction-scoped ones through
        the bouncer when ``pgbouncer`` is set without ``direct_url``.
        """
        bouncer = self.config.pgbouncer and self.config.direct_url is None
        return AdvisoryLocker(
            self.session_url, application_name=application_name, transaction_scoped=bouncer
        )

    @property
    def metrics(self) -> Observer | None:
        """The :class:`jobrun.telemetry.prometheus.PrometheusObserver` when ``metrics_port`` is set.

        Its ``registry`` holds every jobrun metric of this client, to expose
        from a service's own endpoint as well.
        """
        return self._metrics  # type: ignore[no-any-return]

    @property
    def metrics_port(self) -> int | None:
        """The port ``/metrics`` is served on while a worker runs (the bound one for 0)."""
        if self._metrics_server is None:
            return None
        return int(self._metrics_server.port)

    async def ready(self) -> None:
        """Return when the database answers and every migration is applied; raise otherwise.

        What ``/readyz`` checks: a round trip (``store.now()``) and
        :func:`~jobrun.postgres.migrate.check_schema`.
        """
        await self.store.now()
        await check_schema(self.pool)

    # -- producing ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Any]:
        """A pooled connection inside a transaction, for your rows and your enqueues together.

        ::

            async with client.transaction() as conn:
                await conn.execute("INSERT INTO users ...")
                await client.enqueue(NewJob(type="welcome"), conn=conn)

        The connection is a psycopg ``AsyncConnection``. The transaction
        commits when the block ends normally and rolls back when it raises, so
        the job exists exactly when your rows do.
        """
        async with self.pool.connection() as conn, conn.transaction():
            yield conn

    async def enqueue(self, job: NewJob, *, conn: Any | None = None) -> Job:
        """Enqueue ``job``; with ``conn`` (your open transaction) it commits with your rows.

        Fields the caller did not set take the defaults declared with the
        type's handler in this client's registry.
        """
        return await self.store.enqueue(self.registry.with_defaults(job), conn=conn)

    async def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: Any | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Enqueue many jobs in one transaction; one result per input, in order.

        Each job takes its type's declared defaults, as :meth:`enqueue` does.
        """
        if self.registry:
            jobs = [self.registry.with_defaults(job) for job in jobs]
        return await self.store.enqueue_batch(jobs, conn=conn)

    async def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        conn: Any | None = None,
        **options: Unpack[JobOptions],
    ) -> list[UUID]:
        """Enqueue one job of ``job_type`` per payload, alike in all else; their ids, in order.

        The fast path for bulk work: see :meth:`Store.enqueue_many
        <jobrun.postgres.Store.enqueue_many>`. Options not given take the
        ones declared with the type's handler; a type whose handler declares
        an idempotency key is refused with InvalidJob, since jobs enqueued
        alike carry none (use :meth:`enqueue_batch`).
        """
        # The options given win over the defaults declared with the handler.
        merged = self.registry.options_for_many(job_type, options)
        return await self.store.enqueue_many(job_type, payloads, conn=conn, **merged)

    async def result(
        self, job_id: UUID | str, *, wait: timedelta | float | None = None, model: Any = None
    ) -> Any:
        """What ``job_id``'s handler returned, once the job succeeded (None if nothing).

        Without ``wait`` it reads once; with it (a timedelta or seconds) it
        waits that long for the job to finish, woken by the completion's
        notification. Raises :class:`~jobrun.errors.JobNotSucceeded` for a job
        that ended dead or cancelled, :class:`~jobrun.errors.ResultNotReady`
        when it had not finished in time, JobNotFound for an unknown or purged
        job. The value is validated into ``model``, else into the result type
        its handler declares in this client's registry, else returned as JSON.
        """
        return await self._results.result(job_id, wait=wait, model=model)

    async def declare_schedules(self) -> Reconciliation | None:
        """Write the registry's periodic jobs into the schedules now, as the leader would.

        For a deploy step, a script or a test (:func:`jobrun.scheduler.declare_now`);
        None when the registry declares nothing and names no group.
        """
        declared = self.registry.declared_schedules()
        if declared is None:
            return None
        return await declare_now(self.store, declared, self.config.periodic_renew)

    async def migrate(self) -> list[int]:
        """Apply pending migrations (safe to run concurrently); return the versions applied.

        With ``direct_url`` set they run there, on a connection of their own:
        the run holds a session advisory lock and some migrations cannot run
        inside a transaction, neither of which survives a transaction-mode
        bouncer. Behind PgBouncer without ``direct_url`` this raises
        ConfigurationError.
        """
        return await _migrate(self.config, self.pool)

    # -- working --------------------------------------------------------------------------

    def worker(self) -> Worker:
        """A Worker wired from the config, without a dispatcher (see :meth:`run_worker`)."""
        return Worker(self.store, self.registry, self.config, observer=self._metrics)

    async def run_worker(
        self,
        *,
        drain: bool = False,
        stop: asyncio.Event | None = None,
        handle_signals: bool = False,
    ) -> CompletionStats:
        """Run a worker until stopped; return its completion statistics.

        It checks the schema first (:class:`~jobrun.errors.SchemaMissing` when
        the database was never migrated), listens for notifications on the
        store's channel, and runs the scheduler and the maintenance service
        (retention) too when the config says so. When the registry declares
        periodic jobs, it keeps them recorded as running
        (:class:`~jobrun.scheduler.DeclarationRenewal`), for the scheduler's
        leader to write into the schedules (:mod:`jobrun.periodic`).
        ``drain=True`` returns once no job of its queues is due and nothing
        runs (jobs scheduled later, retries waiting out their backoff
        included, are left), for scripts and tests. ``stop`` ends it
        gracefully when set; ``handle_signals`` installs SIGTERM/SIGINT
        handlers (what ``jobrun worker`` does). A client runs one worker at a
        time.
        """
        return await _run_worker(self, drain=drain, stop=stop, handle_signals=handle_signals)


async def _run_worker(
    client: Client, *, drain: bool, stop: asyncio.Event | None, handle_signals: bool
) -> CompletionStats:
    """:meth:`Client.run_worker`'s body: the worker, its notifier and the services beside it."""
    if client._worker is not None:
        raise ConfigurationError("this client already runs a worker")
    await check_schema(client.pool)
    # Resolved first: a periodic job its handler's payload type refuses stops the start.
    declared = client.registry.declared_schedules()
    worker = client.worker()
    listen_url = client.listen_url
    notifier: Notifier | None = None
    if listen_url is not None:
        notifier = await Notifier.start(listen_url, client.store.notify_channel)
    worker.dispatcher = notifier
    _log_connections(client.config, client.database_url, listen_url)
    client._worker = worker
    done = asyncio.Event()
    services: list[asyncio.Task[None]] = []
    try:
        if client._metrics is not None:
            client._metrics_server, publisher = await serve_metrics(client, done)
            services.append(publisher)
        if handle_signals:
            worker.install_signal_handlers()
        if declared is not None:
            renewal = DeclarationRenewal(client.store, declared, client.config.periodic_renew)
            services.append(asyncio.create_task(renewal.run(done), name="jobrun-periodic"))
        if client.config.scheduler:
            runner = Scheduler(client.store, client.locker(), tick=client.config.scheduler_tick)
            services.append(asyncio.create_task(runner.run(done), name="jobrun-scheduler"))
        if client.config.maintenance:
            maintenance = Maintenance(
                client.store, client.locker("jobrun-maintenance"), client.config
            )
            services.append(asyncio.create_task(maintenance.run(done), name="jobrun-maintenance"))
        await worker.run(stop, drain=drain)
    finally:
        done.set()
        for task in services:
            with contextlib.suppress(Exception):
                await task
        if client._metrics_server is not None:
            await client._metrics_server.close()
            client._metrics_server = None
        if notifier is not None:
            await notifier.close()
        client._worker = None
    return worker.stats


async def _open_finish_watcher(client: Client) -> FinishWatcher | None:
    """The LISTEN connection ``Client.result`` waits on; None when the client polls only."""
    url = client.listen_url
    return None if url is None else await FinishWatcher.start(url)


async def _migrate(config: Config, pool: Pool) -> list[int]:
    """:meth:`Client.migrate`'s body: on ``direct_url`` when set, else on ``pool``."""
    if config.direct_url is None:
        if config.pgbouncer:
            raise ConfigurationError(
                "migrations hold a session advisory lock and run statements outside "
                "transactions, which PgBouncer in transaction mode cannot carry: set "
                "direct_url (--direct-url, JOBRUN_DIRECT_URL) to the server itself"
            )
        return await migrate(pool)
    direct = await open_pool(config.direct_url, worker_concurrency=1, name="jobrun-migrate")
    try:
        return await migrate(direct)
    finally:
        await direct.close()


def _log_connections(config: Config, database_url: str, listen_url: str | None) -> None:
    """Say where a worker's session-level connections go (never a password)."""

    def where(url: str) -> str:
        host, port, dbname = database_location(url)
        return f"{host}:{port}/{dbname}"

    if listen_url is None:
        _log.info(
            "no LISTEN (%s): idle workers poll every %gs",
            "behind PgBouncer without a direct URL" if config.listen else "listen is off",
            config.poll.total_seconds(),
        )
    if config.pgbouncer:
        if config.direct_url is None:
            _log.info(
                "PgBouncer mode: pool through %s; leader locks transaction-scoped "
                "through the bouncer",
                where(database_url),
            )
        else:
            _log.info(
                "PgBouncer mode: pool through %s; LISTEN and leader locks direct to %s",
                where(database_url),
                where(config.direct_url),
            )
