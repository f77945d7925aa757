"""The PostgreSQL Store: every job transition of the contract, one transaction each.

Transactions open only here, through :meth:`Store._with_tx`. A transition that
fits in one statement (claim, heartbeat, fail, the plain completion, cancel's
two halves) is written as one statement whose data-modifying CTEs also record
its events, so it is one round trip on an autocommit connection and its event
can never be lost or orphaned. Multi-statement transitions:

* enqueue: one statement inserts the job (+ event) and calls ``pg_notify``;
  on the pool it runs alone on an autocommit connection (one round trip, no
  BEGIN/COMMIT), on a caller's connection inside their transaction. An
  idempotency replay inserts nothing and is followed by a re-read. PostgreSQL
  delivers the notification at commit, so no listener wakes before the job
  is visible. On the pool, a job due now may instead be handed off in the
  same statement: leased to an idle worker's offer (+ its claimed event) and
  sent whole on that worker's channel (see :class:`~jobrun.job.HandoffOffer`).
* enqueue_batch: db now, COPY jobs, keyed jobs by one ``INSERT .. ON CONFLICT``,
  COPY events, one notification per queue.
* complete with a commit callback: statement timeout, the owner-guarded finish
  (+ events), which also locks the rows the owner still holds, ledger rows
  of the jobs it left succeeded (a requested cancel wins and skips the effect),
  their callbacks (the group's :class:`~jobrun.job.Effect` s as one
  ``executemany`` per SQL text). A lost lease or any error rolls the
  callbacks' writes back with everything else.
  The whole transaction is bounded in wall time by ``commit_timeout``
  (:class:`~jobrun.postgres._base.CommitDeadline`): in the async store a
  callback still waiting on something when it runs out is cancelled, the
  transaction rolls back and the job's result is CommitTimeout. The sync twin
  cannot interrupt a thread: it rolls back when the late callback returns,
  and holds the row lock until then (see
  :class:`~jobrun.postgres._base.SyncCommitDeadline`).
* reap: lock expired leases with SKIP LOCKED, verdicts from each job's own
  policy, one batched update (+ events).

Times passed in are database time as read by the caller (``await store.now()``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, cast
from uuid import UUID

import psycopg
from pydantic import BaseModel

from jobrun.errors import (
    ConfigurationError,
    IdempotencyConflict,
    JobNotFound,
    JobrunError,
    LeaseLost,
)
from jobrun.job import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_NOTIFY_CHANNEL,
    DEFAULT_QUEUE,
    Backoff,
    CommitCallback,
    Effect,
    Event,
    EventMode,
    HandoffOffer,
    Job,
    JobFilter,
    JobPage,
    JobState,
    NewJob,
    Outcome,
    OutcomeKind,
    QueueControls,
    QueueDepth,
    QueueInfo,
    QueueStats,
    WorkerOffer,
    key_lock_id,
    new_job_ids,
    notify_channel_problem,
    parse_job_id,
)
from jobrun.observe import Observer
from jobrun.postgres import _base
from jobrun.postgres.convert import (
    depth_from_row,
    event_from_row,
    job_from_new,
    job_from_row,
    job_from_transition,
    job_recorded,
    map_error,
    offer_from_row,
    queue_from_row,
    queue_info_from_row,
    queue_stats_from_row,
    utc,
)
from jobrun.postgres.copyrows import JobCopyEncoder, copy_data
from jobrun.postgres.lean import AsyncLeanConnection
from jobrun.postgres.pool import Pool, database_location
from jobrun.postgres.schedules import ScheduleMethods
from jobrun.sqlc import effects as effect_queries
from jobrun.sqlc import events as event_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import locks as lock_queries
from jobrun.sqlc import models
from jobrun.sqlc import offers as offer_queries
from jobrun.sqlc import queues as queue_queries
from jobrun.sqlc import system as system_queries
from jobrun.tracing import current_trace_meta

__all__ = ["DEFAULT_NOTIFY_CHANNEL", "Store"]

log = logging.getLogger("jobrun.store")

DEFAULT_RETRY_JITTER = 0.1
"""A failed job's wait is its backoff spread by up to 10% either way (never past its max)."""
MAX_RETRY_JITTER = 0.5


_COPY_CHUNK = 5_000
# The claim statement takes an offer lifetime even when it offers nothing.
_NO_OFFER_TTL = timedelta(0)


async def _copy_in(tx: psycopg.AsyncConnection[Any], statement: str, data: bytes) -> None:
    """Run the generated COPY ``statement`` with ``data``, a whole binary COPY stream."""
    async with tx.cursor() as cur, cur.copy(cast(Any, statement)) as copy:
        await copy.write(data)


def _lean(conn: psycopg.AsyncConnection[Any]) -> psycopg.AsyncConnection[Any]:
    """``conn`` (pooled, autocommit) as the generated querier takes it, run without a cursor."""
    return cast(psycopg.AsyncConnection[Any], AsyncLeanConnection(conn))


class Store(ScheduleMethods):
    """jobrun's Store port on a psycopg async pool.

    ``event_mode`` chooses which transitions are recorded (claims are skipped
    in ``terminal`` mode); ``commit_timeout`` bounds a completion transaction
    with commit callbacks, each statement on the server and the whole
    transaction in wall time (see :meth:`record_outcomes`); ``retry_jitter``
    spreads a failed job's backoff by up to that fraction either way (0 turns
    it off; at most 0.5);
    ``notify_channel`` is the LISTEN/NOTIFY channel; ``payload_models``
    validates the payload of the named job types at enqueue; ``job_types``,
    when given (a :class:`~jobrun.client.Client` gives its registry's), are
    the only types it enqueues: any other is refused with InvalidJob naming
    them, as no worker of the application could run it; ``observer``
    (:class:`~jobrun.observe.Observer`) is told of every job enqueued. When
    ``opentelemetry-api`` is installed and a span is current, enqueue writes
    its trace context to the job's ``meta`` (:mod:`jobrun.tracing`).
    """

    def __init__(
        self,
        pool: Pool,
        *,
        event_mode: EventMode | str = EventMode.ALL,
        commit_timeout: timedelta = timedelta(seconds=30),
        retry_jitter: float = DEFAULT_RETRY_JITTER,
        notify_channel: str = DEFAULT_NOTIFY_CHANNEL,
        payload_models: Mapping[str, type[BaseModel]] | None = None,
        max_payload_bytes: int = _base.DEFAULT_MAX_PAYLOAD_BYTES,
        observer: Observer | None = None,
        job_types: Iterable[str] | None = None,
    ) -> None:
        if commit_timeout <= timedelta(0):
            raise ConfigurationError("commit_timeout must be positive")
        if not 0 <= retry_jitter <= MAX_RETRY_JITTER:
            raise ConfigurationError(
                f"retry_jitter must be between 0 and {MAX_RETRY_JITTER}, got {retry_jitter}"
            )
        channel_problem = notify_channel_problem(notify_channel)
        if channel_problem is not None:
            raise ConfigurationError(channel_problem)
        if max_payload_bytes < 1:
            raise ConfigurationError("max_payload_bytes must be positive")
        self._pool = pool
        self._pid = os.getpid()
        self.event_mode = EventMode(event_mode)
        self.commit_timeout = commit_timeout
        self.retry_jitter = retry_jitter
        self.notify_channel = notify_channel
        self.payload_models: dict[str, type[BaseModel]] = dict(payload_models or {})
        self.job_types: frozenset[str] | None = (
            frozenset(job_types) if job_types is not None else None
        )
        self.max_payload_bytes = max_payload_bytes
        self.observer = observer
        """Told of every job enqueued through this store (metrics); None: nobody."""
        self._timeout_setting = f"{max(1, int(commit_timeout.total_seconds() * 1000))}ms"
        self._location = database_location(str(pool.conninfo))

    @property
    def pool(self) -> Pool:
        """The pool this store runs on."""
        return self._pool

    # -- plumbing -----------------------------------------------------------------

    def _forked(self) -> None:
        """Called when the pool is about to be used in a fork of the process that opened it.

        Refuses: the pool's connections belong to the parent too. SyncProducer,
        which knows how its own pool was opened, opens a new one instead.
        """
        raise _base.forked_pool_error(self._pid)

    @asynccontextmanager
    async def _with_tx(
        self, conn: psycopg.AsyncConnection[Any] | None = None
    ) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """The one way a transaction opens: on ``conn`` (joining its transaction) or the pool.

        On a caller's connection that already has a transaction open this is a
        savepoint inside it, so the caller's commit or rollback decides.
        """
        try:
            if conn is not None:
                if not isinstance(conn, psycopg.AsyncConnection):
                    raise _base.wrong_connection(psycopg.AsyncConnection)
                if _base.needs_transaction_block(conn):
                    # Autocommit: our own atomic transaction. Inside the
                    # caller's transaction: a savepoint, so a failure here
                    # leaves their transaction usable.
                    async with conn.transaction():
                        yield conn
                else:
                    # psycopg's implicit transaction has not begun yet: our
                    # first statement begins it and the caller commits it.
                    yield conn
                return
            if self._pid != os.getpid():
                self._forked()
            async with self._pool.connection() as pooled, pooled.transaction():
                yield pooled
        except psycopg.Error as exc:
            raise map_error(exc, self._location, self._pool) from exc

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection for a single statement (its own implicit transaction).

        On jobrun's pools (autocommit) the statement commits as it ends, and
        the commit ``pool.connection()`` sends on exit would do nothing at the
        cost of a pass through psycopg's wait machinery, so the connection is
        only borrowed and returned. A caller's pool without autocommit opens
        a transaction on the first statement: the connection's own block
        commits it (or rolls it back on an error), as ``pool.connection()``
        does, before it goes back.
        """
        if self._pid != os.getpid():
            self._forked()
        try:
            conn = await self._pool.getconn()
            try:
                if conn.autocommit:
                    yield conn
                else:
                    async with conn:
                        yield conn
            finally:
                await self._pool.putconn(conn)
        except psycopg.Error as exc:
            raise map_error(exc, self._location, self._pool) from exc

    async def now(self) -> datetime:
        """The database clock, in UTC."""
        async with self._connection() as conn:
            now = await system_queries.AsyncQuerier(conn).database_now()
        if now is None:  # pragma: no cover - now() always returns a row
            raise JobrunError("the database returned no time")
        return utc(now)

    # -- enqueue ------------------------------------------------------------------

    async def enqueue(
        self, job: NewJob, *, conn: psycopg.AsyncConnection[Any] | None = None
    ) -> Job:
        """Insert ``job``, or return the stored job when it replays an idempotency key.

        A replay (same key, same body) returns the stored job, whose ``id``
        differs from ``job.id``; a different body raises IdempotencyConflict.
        With ``conn`` the job joins the caller's transaction and commits (and
        notifies) with it or not at all.
        """
        (item,) = _base.prepare_jobs(
            [job], self.payload_models, self.max_payload_bytes, self.job_types
        )
        meta = current_trace_meta()
        if conn is None:
            # The common path: one statement on an autocommit pooled connection
            # inserts the job and its event and notifies, or hands the job to
            # an idle worker's offer; it commits as it ends.
            params = _base.insert_args(
                item,
                self.notify_channel,
                meta,
                handoff=_base.handoff_allowed(item, meta),
                record_claim=self.event_mode is EventMode.ALL,
            )
            async with self._connection() as pooled:
                queries = job_queries.AsyncQuerier(_lean(pooled))
                row = await queries.job_insert_notify(params=params)
                if row is None:
                    return await self._replay(queries, item, params)
        else:
            # Never handed off: the caller's transaction may commit long after
            # the lease it would start, or not at all.
            params = _base.insert_args(item, self.notify_channel, meta)
            async with self._with_tx(conn) as tx:
                queries = job_queries.AsyncQuerier(tx)
                row = await queries.job_insert_notify(params=params)
                if row is None:
                    return await self._replay(queries, item, params)
        made = _base.inserted_job(item, row, params.meta)
        if self.observer is not None:
            self.observer.enqueued((made,))
        return made

    async def _replay(
        self,
        queries: job_queries.AsyncQuerier,
        item: _base.PreparedJob,
        params: job_queries.JobInsertNotifyParams,
    ) -> Job:
        """The stored job that ``item``'s insert conflicted with, or ``item`` inserted after all.

        Runs where the insert ran (the pooled connection, or the caller's
        transaction). Raises IdempotencyConflict when the stored body differs.
        """
        job = item.job
        stored = await queries.job_get_by_idempotency_key(
            queue=job.queue, idempotency_key=job.idempotency_key or ""
        )
        if stored is not None:
            return _base.check_replay(item, job_from_row(stored))
        # The conflicting row was purged between our insert and read: retry once.
        row = await queries.job_insert_notify(params=params)
        if row is None:
            raise JobrunError(f"could not insert or read job key {job.idempotency_key}")
        made = _base.inserted_job(item, row, params.meta)
        if self.observer is not None:
            self.observer.enqueued((made,))
        return made

    async def enqueue_batch(
        self, jobs: Sequence[NewJob], *, conn: psycopg.AsyncConnection[Any] | None = None
    ) -> list[Job | IdempotencyConflict]:
        """Insert many jobs in one transaction; one result per input, in order.

        Jobs without an idempotency key go through COPY; keyed jobs through
        one ``INSERT .. ON CONFLICT DO NOTHING``, so a replay returns the
        stored job and a conflicting body is reported as an IdempotencyConflict
        in its slot while the rest are inserted. Every payload is validated
        before anything is written.
        """
        if not jobs:
            return []
        prepared = _base.prepare_jobs(
            jobs, self.payload_models, self.max_payload_bytes, self.job_types
        )
        results: list[Job | IdempotencyConflict | None] = [None] * len(prepared)
        meta = current_trace_meta()
        fresh: list[Job] = []
        async with self._with_tx(conn) as tx:
            db_now = await system_queries.AsyncQuerier(tx).database_now()
            assert db_now is not None
            now = utc(db_now)
            queries = job_queries.AsyncQuerier(tx)
            events = event_queries.AsyncQuerier(tx)
            queues: set[str] = set()
            plain, keyed = _base.split_batch(prepared)
            encoder = JobCopyEncoder(now, meta)
            # Chunks bound the memory of one COPY and of the id array its events take.
            for start in range(0, len(plain), _COPY_CHUNK):
                rows = []
                ids = []
                for index in plain[start : start + _COPY_CHUNK]:
                    item = prepared[index]
                    job = item.job
                    run_at = _base.run_at_of(job, now)
                    rows.append(
                        encoder.row(
                            job.id, job.queue, job.type, item.text, job.priority,
                            job.max_attempts, job.backoff, run_at, None,
                        )
                    )  # fmt: skip
                    made = job_from_new(job, item.payload, run_at, now, meta)
                    ids.append(made.id)
                    results[index] = made
                    queues.add(made.queue)
                    fresh.append(made)
                await _copy_in(tx, encoder.statement, copy_data(rows))
                await events.event_insert_enqueued_many(job_ids=ids, at=now)
            if keyed:
                new_jobs = await self._insert_keyed(queries, prepared, keyed, now, results, meta)
                fresh += new_jobs
                if new_jobs:
                    await events.event_insert_enqueued_many(
                        job_ids=[j.id for j in new_jobs], at=now
                    )
                    queues.update(j.queue for j in new_jobs)
            for queue in sorted(queues):
                await queries.job_notify(channel=self.notify_channel, queue=queue)
        if self.observer is not None and fresh:
            self.observer.enqueued(fresh)
        return [r for r in results if r is not None]

    async def enqueue_many(
        self,
        job_type: str,
        payloads: Iterable[Any],
        *,
        queue: str = DEFAULT_QUEUE,
        priority: int = 0,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: Backoff = DEFAULT_BACKOFF,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        conn: psycopg.AsyncConnection[Any] | None = None,
    ) -> list[UUID]:
        """Insert one job of ``job_type`` per payload, alike in all else, in one transaction.

        The bulk path: the shared fields (``queue``, ``priority``,
        ``max_attempts``, ``backoff``, ``delay`` or ``run_at``, as NewJob
        takes them) are validated once, each payload as JSON, all before
        anything is written; the jobs go in by COPY. Returns the new jobs' ids
        in payload order. Jobs with idempotency keys go through
        :meth:`enqueue_batch`. With ``conn`` the jobs join the caller's
        transaction.
        """
        fields = dict(
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            backoff=backoff,
            delay=delay,
            run_at=run_at,
        )
        many = _base.prepare_many(
            job_type, payloads, fields, self.payload_models, self.max_payload_bytes, self.job_types
        )
        if not many.texts:
            return []
        meta = current_trace_meta()
        ids = new_job_ids(len(many.texts))
        async with self._with_tx(conn) as tx:
            db_now = await system_queries.AsyncQuerier(tx).database_now()
            assert db_now is not None
            now = utc(db_now)
            due = _base.run_at_of(many.template, now)
            queries = job_queries.AsyncQuerier(tx)
            events = event_queries.AsyncQuerier(tx)
            encoder = JobCopyEncoder(now, meta)
            job = many.template
            for start in range(0, len(ids), _COPY_CHUNK):
                chunk = ids[start : start + _COPY_CHUNK]
                texts = many.texts[start : start + _COPY_CHUNK]
                rows = encoder.alike(
                    chunk, texts, queue=job.queue, job_type=job.type, priority=job.priority,
                    max_attempts=job.max_attempts, backoff=job.backoff, run_at=due,
                )  # fmt: skip
                await _copy_in(tx, encoder.statement, copy_data(rows))
                await events.event_insert_enqueued_many(job_ids=chunk, at=now)
            await queries.job_notify(channel=self.notify_channel, queue=many.template.queue)
        if self.observer is not None:
            self.observer.enqueued(_base.many_jobs(many, ids, due, now, meta))
        return ids

    async def _insert_keyed(
        self,
        queries: job_queries.AsyncQuerier,
        prepared: list[_base.PreparedJob],
        keyed: list[int],
        now: Any,
        results: list[Job | IdempotencyConflict | None],
        meta: dict[str, str] | None,
    ) -> list[Job]:
        inserted: list[Job] = []
        for start in range(0, len(keyed), _COPY_CHUNK):
            chunk = keyed[start : start + _COPY_CHUNK]
            items = [prepared[i] for i in chunk]
            params = _base.keyed_arrays(items, now, meta)
            new_ids = set(await queries.job_insert_keyed_many(params=params))
            missing = [i for i in chunk if prepared[i].job.id not in new_ids]
            stored: list[models.Job] = []
            if missing:
                stored = await queries.job_get_by_idempotency_keys(
                    queues=[prepared[i].job.queue for i in missing],
                    idempotency_keys=[prepared[i].job.idempotency_key or "" for i in missing],
                )
            inserted += _base.keyed_results(prepared, chunk, new_ids, stored, now, results, meta)
        return inserted

    # -- the lease ----------------------------------------------------------------

    async def claim(
        self,
        queues: Sequence[str],
        owner: str,
        limit: int,
        lease: timedelta,
        *,
        offer: HandoffOffer | None = None,
    ) -> list[Job]:
        """Lease up to ``limit`` due jobs of ``queues`` for ``owner``, in claim order.

        One statement: queued → leased, attempts + 1, lease until db now +
        ``lease``; in event mode ``all`` the same statement records the claims.
        The same statement rewrites ``owner``'s handoff offers: with ``offer``,
        the slots this claim leaves free are offered for each of ``queues``;
        without it (or with none left) the owner's offers are withdrawn. A job
        handed through them is leased for ``offer.confirm_within`` (at most
        ``lease``) until a heartbeat confirms it.
        """
        if limit <= 0 or not queues:
            return []
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(_lean(conn)).job_claim(
                params=job_queries.JobClaimParams(
                    queues=list(queues),
                    owner=owner,
                    max_jobs=limit,
                    lease=lease,
                    now=None,
                    offer_channel=None if offer is None else offer.channel,
                    offer_lease=lease if offer is None else min(lease, offer.confirm_within),
                    offer_ttl=_NO_OFFER_TTL if offer is None else offer.ttl,
                    record_events=self.event_mode is EventMode.ALL,
                )
            )
        jobs = [job_from_row(r) for r in rows]
        # id.int: comparing UUIDs calls Python-level __lt__, and ties on
        # priority and run_at are the rule for batch-enqueued jobs.
        jobs.sort(key=lambda j: (j.priority, j.run_at, j.id.int))
        return jobs

    async def retract_offers(self, owner: str) -> int:
        """Withdraw every handoff offer of ``owner``; return how many there were.

        A stopping worker calls it first, so no enqueue hands it a job it
        would only have to give back.
        """
        async with self._connection() as conn:
            return await offer_queries.AsyncQuerier(conn).worker_offers_withdraw(owner=owner)

    async def offers(self) -> list[WorkerOffer]:
        """The handoff offers standing now (operators and tests), by queue and owner."""
        async with self._connection() as conn:
            rows = await offer_queries.AsyncQuerier(conn).worker_offers_list()
        return [offer_from_row(r) for r in rows]

    async def heartbeat(self, owner: str, jobs: Sequence[Job], lease: timedelta) -> set[UUID]:
        """Extend ``owner``'s leases on ``jobs`` to db now + ``lease``; return the ids kept.

        A job is kept while the lease fence holds: ``owner`` holds it, it is
        still the attempt that was claimed, and its lease has not expired.
        Jobs whose cancel was requested are left out as well: the worker must
        stop every job missing from the result.
        """
        if not jobs:
            return set()
        async with self._connection() as conn:
            kept = await job_queries.AsyncQuerier(conn).job_heartbeat(
                params=job_queries.JobHeartbeatParams(
                    ids=[j.id for j in jobs],
                    attempts=[j.attempts for j in jobs],
                    owner=owner,
                    lease=lease,
                    now=None,
                )
            )
        return set(kept)

    # -- completion -----------------------------------------------------------------

    async def effect_key(self, job: Job) -> tuple[str, str]:
        """The (scope, key) of ``job``'s effect in the ``processed_effects`` ledger.

        The rule lives in the database (``job_effect_scope``/``job_effect_key``):
        the key names what an idempotency key names, the queue and the key, or
        the job's id when it has no key.
        """
        async with self._connection() as conn:
            row = await effect_queries.AsyncQuerier(conn).effect_key_of(
                type=job.type, queue=job.queue, idempotency_key=job.idempotency_key, id=job.id
            )
        assert row is not None  # a SELECT without FROM returns one row
        return row.scope, row.key

    async def effect_done(self, job: Job) -> bool:
        """Whether ``job``'s effect has committed."""
        async with self._connection() as conn:
            done = await effect_queries.AsyncQuerier(conn).effect_exists(
                type=job.type, queue=job.queue, idempotency_key=job.idempotency_key, id=job.id
            )
        return bool(done)

    async def complete(self, job: Job, owner: str, commit: CommitCallback | None = None) -> Job:
        """Finish a leased job: succeeded, or cancelled when a cancel was requested.

        ``commit`` runs inside the completion transaction, after the ledger row
        is inserted, and is skipped when the row already existed (the effect
        committed on an earlier attempt) or when the job ends cancelled (the
        requested cancel wins, so no ledger row is written either). Raises
        LeaseLost, changing nothing, when ``owner`` no longer holds the lease.
        """
        return await self._record_one(owner, Outcome(job=job, commit=commit))

    async def fail(self, job: Job, owner: str, error: str) -> Job:
        """Record a failed attempt: queued after the job's backoff, dead, or cancelled.

        Dead when the attempts are spent, cancelled when a cancel was
        requested, otherwise queued again after the job's own backoff (with
        ``retry_jitter``). Raises LeaseLost, changing nothing, when ``owner``
        no longer holds the lease.
        """
        return await self._record_one(owner, Outcome(job=job, kind=OutcomeKind.FAIL, detail=error))

    async def release(self, job: Job, owner: str, reason: str) -> Job:
        """Hand a leased job back unfinished: queued and due now, its attempt not counted.

        For a worker that stops a job for its own reasons (shutdown), so the
        job is retried promptly instead of waiting out its lease, and a job on
        its last attempt is not killed by a deploy. A cancel-requested job ends
        cancelled. Raises LeaseLost when ``owner`` no longer holds the lease.
        """
        return await self._record_one(
            owner, Outcome(job=job, kind=OutcomeKind.RELEASE, detail=reason)
        )

    async def _record_one(self, owner: str, outcome: Outcome) -> Job:
        (result,) = await self.record_outcomes(owner, [outcome])
        if isinstance(result, BaseException):
            raise result
        return result

    async def record_outcomes(
        self, owner: str, outcomes: Sequence[Outcome]
    ) -> list[Job | Exception]:
        """Record a batch of attempts' outcomes with as few transactions as the guarantees allow.

        Every outcome without a commit callback (completions, failures,
        hand-backs, snoozes, cancels alike) is one statement together. Jobs
        with a callback share one transaction (group commit): one fenced
        finishing statement (which locks the rows it changes until the
        commit), ledger rows inserted together, each callback run in turn.
        If a callback raises,
        that transaction rolls back, the job whose callback raised gets its
        error, and the rest are completed again without it; any other failure
        completes each job in a transaction of its own. So one bad effect
        never takes the others with it, at the price of running their
        callbacks again (each Outcome counts its ``invocations``). One result
        per input, in order: the job as left, LeaseLost, or the callback's error.

        A group's transaction lasts at most ``commit_timeout`` in wall time,
        callbacks included. When it runs out the callback running then is
        stopped (the async store cancels it; the sync one, which cannot, rolls
        back when it returns), the transaction rolls back, that job's result is
        CommitTimeout, and the rest go again without it, as for a raising
        callback; when no callback was running, it is a failure like any other.
        The job stays leased and the worker fails the attempt.
        """
        results: dict[int, Job | Exception] = {}
        plain = [o for o in outcomes if o.commit is None or o.kind is not OutcomeKind.COMPLETE]
        pending = [o for o in outcomes if o.commit is not None and o.kind is OutcomeKind.COMPLETE]
        if plain:
            async with self._connection() as conn:
                await self._record(job_queries.AsyncQuerier(_lean(conn)), owner, plain, results)
        while pending:
            try:
                await self._complete_group(owner, pending, results)
                break
            except _CallbackFailed as failed:
                # That job's attempt failed; the rest go again without it.
                # Their callbacks run a second time (the rollback undid their
                # writes), which is why a callback must be safe to re-invoke.
                results[failed.outcome.job.id.int] = failed.error
                log.debug("group commit rolled back by one callback; retrying the rest")
                pending = [o for o in pending if o is not failed.outcome]
            except Exception as exc:
                if len(pending) == 1:
                    results[pending[0].job.id.int] = _as_exception(exc)
                    break
                # A failed statement, a lock timeout, a lost connection: not
                # known to be one callback's fault, so each job gets a
                # transaction of its own.
                log.debug("group commit rolled back, completing one by one: %s", exc)
                for outcome in pending:
                    try:
                        await self._complete_group(owner, [outcome], results)
                    except _CallbackFailed as failed:
                        results[outcome.job.id.int] = failed.error
                    except Exception as single:
                        results[outcome.job.id.int] = _as_exception(single)
                break
        return [results[o.job.id.int] for o in outcomes]

    async def _record(
        self,
        queries: job_queries.AsyncQuerier,
        owner: str,
        outcomes: Sequence[Outcome],
        results: dict[int, Job | Exception],
    ) -> None:
        """Record ``outcomes`` in one statement; LeaseLost for the jobs the fence refused."""
        rows = await queries.job_record_outcomes(
            params=job_queries.JobRecordOutcomesParams(
                ids=[o.job.id for o in outcomes],
                attempts=[o.job.attempts for o in outcomes],
                outcomes=[_OUTCOMES[o.kind] for o in outcomes],
                details=[o.detail for o in outcomes],
                delays=[o.delay for o in outcomes],
                attempt_limits=[o.max_attempts or 0 for o in outcomes],
                owner=owner,
                jitter=self.retry_jitter,
                now=None,
            )
        )
        # Keyed by the ids' integers: a UUID hashes in Python, an int in C,
        # and this runs a few times per job on the worker's hottest path.
        by_key = {o.job.id.int: o.job for o in outcomes}
        for row in rows:
            key = row.id.int
            results[key] = job_recorded(by_key[key], row)
        for outcome in outcomes:
            key = outcome.job.id.int
            if key not in results:
                results[key] = LeaseLost(outcome.job.id, owner)

    async def _complete_group(
        self, owner: str, group: Sequence[Outcome], results: dict[int, Job | Exception]
    ) -> None:
        outcome: dict[int, Job | Exception] = {}
        # The callback running right now, if any: the one a timeout blames.
        running: list[Outcome] = []
        # The wall-clock bound starts once the connection is ours: waiting for
        # the pool is PoolExhausted's business, not the commit timeout's.
        deadline = _base.CommitDeadline(self.commit_timeout)
        try:
            # Pipeline mode: statements whose results nobody reads yet (the
            # timeout, each callback's writes) travel with the next read, so a
            # group of N callbacks costs a handful of round trips, not N + 5.
            async with self._with_tx() as tx, deadline, tx.pipeline() as pipeline:
                try:
                    await self._complete_group_in(tx, owner, group, outcome, deadline, running)
                except BaseException:
                    # Collect whatever error the pipeline still holds (a failed
                    # statement's), so leaving the block reports one error, ours,
                    # instead of psycopg warning about a second one on stderr.
                    with contextlib.suppress(psycopg.Error):
                        await pipeline.sync()
                    raise
        except Exception as exc:
            if not deadline.expired():
                raise
            # Out of time: whatever surfaced (the deadline's TimeoutError, a
            # statement cut short) the cause is the limit, and the rollback is done.
            if running:
                raise _CallbackFailed(running[0], deadline.error(callback=True)) from exc
            raise deadline.error(callback=False) from exc
        results.update(outcome)

    async def _complete_group_in(
        self,
        tx: psycopg.AsyncConnection[Any],
        owner: str,
        group: Sequence[Outcome],
        results: dict[int, Job | Exception],
        deadline: _base.CommitDeadline,
        running: list[Outcome],
    ) -> None:
        await effect_queries.AsyncQuerier(tx).transaction_set_statement_timeout(
            timeout=self._timeout_setting
        )
        queries = job_queries.AsyncQuerier(tx)
        # The outcomes first: the fenced update both decides which jobs the
        # owner still holds and locks their rows until the commit, so no
        # callback runs for a job whose lease is gone, and none of the rows
        # can change under the callbacks. (Locking them with a SELECT .. FOR
        # UPDATE first wrote every row twice.) In id order, as every
        # multi-row lock here is taken, so two transactions cannot deadlock.
        ordered = sorted(group, key=lambda o: o.job.id.int)
        await self._record(queries, owner, ordered, results)
        kept = [o for o in ordered if not isinstance(results.get(o.job.id.int), LeaseLost)]
        if not kept:
            return
        # Only the jobs left succeeded get a ledger row, so a job a requested
        # cancel left cancelled runs no callback and holds no key lock.
        fresh = {
            job_id.int
            for job_id in await effect_queries.AsyncQuerier(tx).effect_insert_many(
                job_ids=[o.job.id for o in kept]
            )
        }
        keys = {key_lock_id(k) for o in kept if o.job.id.int in fresh for k in o.lock_keys}
        if keys:
            # Every key of the group, lowest id first, before any callback runs:
            # the one global order that keeps two groups from deadlocking.
            await lock_queries.AsyncQuerier(tx).key_lock_many(ids=sorted(keys))
        # Effects (one statement each) of the group, by their SQL text: each
        # text goes as one executemany after the function callbacks.
        effects: dict[str, list[Any]] = {}
        for outcome in kept:
            if outcome.job.id.int in fresh and outcome.commit is not None:
                outcome.invocations += 1
                if isinstance(outcome.commit, Effect):
                    effects.setdefault(outcome.commit.sql, []).append(outcome.commit.params)
                    continue
                running.append(outcome)
                try:
                    await outcome.commit(tx)
                except psycopg.Error:
                    # In pipeline mode a failed statement surfaces at a later
                    # read, possibly inside the next callback: whose it was is
                    # unknown here, so each job is then tried on its own.
                    raise
                except Exception as exc:
                    if deadline.expired():
                        raise _CallbackFailed(outcome, deadline.error(callback=True)) from exc
                    raise _CallbackFailed(outcome, exc) from exc
                if deadline.expired():
                    # A callback that could not be stopped (a sync one, or one
                    # that swallowed its cancellation) returned too late.
                    raise _CallbackFailed(outcome, deadline.error(callback=True))
                running.clear()
        for statement, params in effects.items():
            # A failing statement is nobody's in particular: the caller then
            # completes each job of the group in a transaction of its own.
            async with tx.cursor() as cur:
                await cur.executemany(cast(Any, statement), params)

    async def reap_expired(self, limit: int = 1000, *, now: datetime | None = None) -> list[Job]:
        """Requeue, kill or cancel jobs whose lease expired by database now (or ``now``).

        An expired lease is a failed attempt (the claim already counted it, so
        a crash costs one): queued after the job's own backoff, dead when its
        attempts are spent, cancelled when a cancel was requested. The same
        rule as :meth:`fail`, decided by the same database function.
        """
        async with self._with_tx() as tx:
            queries = job_queries.AsyncQuerier(tx)
            rows = await queries.job_reap_expired(max_jobs=limit, jitter=self.retry_jitter, now=now)
            notify = sorted({r.queue for r in rows if r.state == models.JobState.QUEUED})
            for queue in notify:
                await queries.job_notify(channel=self.notify_channel, queue=queue)
        return [job_from_row(r) for r in rows]

    # -- operators ----------------------------------------------------------------

    async def get(self, job_id: UUID) -> Job:
        """One job by id; JobNotFound when there is none, InvalidJob for a malformed id."""
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            row = await job_queries.AsyncQuerier(conn).job_get(id=job_id)
        if row is None:
            raise JobNotFound(job_id)
        return job_from_row(row)

    async def list_jobs(
        self, filter: JobFilter | None = None, *, limit: int = 50, cursor: UUID | None = None
    ) -> JobPage:
        """A page of jobs matching ``filter``, newest first; keyset-paginated by id."""
        if cursor is not None:
            cursor = parse_job_id(cursor)
        args = _base.list_args(filter, limit, cursor)
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_list(params=args)
        return _base.page_of(rows, limit)

    async def cancel(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Cancel a job: a queued one ends cancelled now; a leased one gets a cancel request.

        The worker holding a cancel-requested job stops it at its next
        heartbeat, and the job ends cancelled. A finished job raises
        InvalidTransition. ``actor`` (who asked) is recorded in the event's
        detail as ``by <actor>``.
        """
        job_id = parse_job_id(job_id)
        async with self._with_tx() as tx:
            row = await job_queries.AsyncQuerier(tx).job_cancel(id=job_id, now=None, actor=actor)
        return job_from_transition(job_id, "cancel", row)

    async def retry(self, job_id: UUID, *, actor: str | None = None) -> Job:
        """Put a dead or cancelled job back in its queue, due now, and wake a worker.

        ``actor`` (who asked) is recorded in the event's detail as ``by <actor>``.
        """
        job_id = parse_job_id(job_id)
        async with self._with_tx() as tx:
            queries = job_queries.AsyncQuerier(tx)
            row = await queries.job_retry(id=job_id, now=None, actor=actor)
            job = job_from_transition(job_id, "retry", row)
            await queries.job_notify(channel=self.notify_channel, queue=job.queue)
        return job

    async def purge(
        self, older_than: timedelta, batch_size: int = 1000, *, now: datetime | None = None
    ) -> int:
        """Delete finished jobs (and their events) older than ``older_than``.

        Age is measured by the database clock. Works in batches of
        ``batch_size``, each its own short transaction, so no lock is held long.
        The effect ledger keeps its rows (see :meth:`prune_effects`), so an old
        idempotency key replayed after a purge does not run its effect again.
        """
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        _base.check_older_than(older_than)
        total = 0
        # One terminal state at a time: each pass is a range scan of
        # jobs_finished_state_idx, the one index of finished jobs.
        for state in sorted(_base.FINISHED_STATES):
            while True:
                deleted = await self.purge_finished_batch(state, older_than, batch_size, now=now)
                total += deleted
                if deleted < batch_size:
                    break
        return total

    async def prune_effects(
        self, older_than: timedelta, batch_size: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete ledger rows older than ``older_than`` no job needs; return how many.

        The ledger is what stops a replayed idempotency key from running its
        effect twice, so it is pruned on its own, longer clock than the jobs:
        a key replayed after its ledger row is pruned runs its effect again.
        A row is never pruned while its job, or any job of its effect key
        (type, queue, idempotency key: a replay queued after a purge), exists.
        """
        _base.check_older_than(older_than)
        if batch_size < 1:
            raise ConfigurationError("batch_size must be at least 1")
        total = 0
        while True:
            async with self._connection() as conn:
                deleted = await effect_queries.AsyncQuerier(conn).effect_prune(
                    older_than=older_than, batch_size=batch_size, now=now
                )
            total += deleted
            if deleted < batch_size:
                return total

    async def depth(self) -> list[QueueDepth]:
        """Job counts per queue and state, with the oldest creation time of each."""
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_depth()
        return [depth_from_row(r.queue, r.state, r.count, r.oldest_created_at) for r in rows]

    async def queue_stats(self) -> list[QueueStats]:
        """Per queue: jobs queued, due, leased, and the lag of the oldest due job.

        Reads only the claim and lease indexes, so its cost follows the backlog,
        not the table (finished jobs are never counted): cheap enough for a
        metrics timer.
        """
        async with self._connection() as conn:
            rows = await job_queries.AsyncQuerier(conn).job_queue_stats()
        return [queue_stats_from_row(r) for r in rows]

    # -- queue controls --------------------------------------------------------------

    async def list_queues(self) -> list[QueueInfo]:
        """Every queue with controls or with queued or leased jobs, by name.

        Each comes with its controls and how many of its jobs are queued and
        leased right now (counted from the partial indexes of those states).
        """
        async with self._connection() as conn:
            rows = await queue_queries.AsyncQuerier(conn).queue_list()
        return [queue_info_from_row(r) for r in rows]

    async def pause_queue(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Stop every worker from claiming jobs of queue ``name``, from the next claim on.

        Jobs already leased run to their end; jobs can still be enqueued.
        ``actor`` (who asked) is stored as the queue's ``changed_by``, as by
        every queue control; None stores that the change named nobody.
        """
        return await self._set_paused(name, paused=True, actor=actor)

    async def resume_queue(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Let workers claim jobs of a paused queue again; ``actor`` as for a pause."""
        return await self._set_paused(name, paused=False, actor=actor)

    async def _set_paused(self, name: str, *, paused: bool, actor: str | None) -> QueueControls:
        _base.check_queue_name(name)
        actor = _base.bounded_actor(actor)
        async with self._connection() as conn:
            row = await queue_queries.AsyncQuerier(conn).queue_set_paused(
                name=name, paused=paused, actor=actor
            )
        assert row is not None  # an upsert always returns its row
        return queue_from_row(row)

    async def set_queue_limits(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate: tuple[int, timedelta] | None = None,
        actor: str | None = None,
    ) -> QueueControls:
        """Limit queue ``name`` across every worker; a limit left None stays as it was.

        ``concurrency``: at most that many of its jobs leased at once.
        ``rate``: ``(count, interval)``, at most ``count`` claims per
        ``interval``, counted in fixed windows of ``interval`` aligned to the
        epoch. Applies from the next claim on; leases above a lowered
        concurrency limit are not taken back, the queue just claims nothing
        until it is below it. ConfigurationError when neither is given or a
        value is out of range or not a whole number (a float, a bool), before
        anything is sent. ``actor`` as for :meth:`pause_queue`.
        """
        args = _base.limits_args(name, concurrency, rate, actor)
        async with self._connection() as conn:
            row = await queue_queries.AsyncQuerier(conn).queue_set_limits(params=args)
        assert row is not None  # an upsert always returns its row
        return queue_from_row(row)

    async def clear_queue_limits(self, name: str, *, actor: str | None = None) -> QueueControls:
        """Remove both limits of queue ``name``; a pause stays as it is; records ``actor``."""
        _base.check_queue_name(name)
        async with self._connection() as conn:
            row = await queue_queries.AsyncQuerier(conn).queue_clear_limits(
                name=name, actor=_base.bounded_actor(actor)
            )
        return queue_from_row(row) if row is not None else QueueControls(name=name)

    async def events(self, job_id: UUID) -> list[Event]:
        """The recorded transitions of a job, oldest first; InvalidJob for a malformed id."""
        job_id = parse_job_id(job_id)
        async with self._connection() as conn:
            rows = await event_queries.AsyncQuerier(conn).event_list_by_job(job_id=job_id)
        return [event_from_row(r) for r in rows]

    async def prune_events(
        self, older_than: timedelta, batch_size: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete events older than ``older_than`` (database clock), in bounded batches.

        ``now`` pins the clock (tests); by default age is measured from database now.
        """
        _base.check_older_than(older_than)
        total = 0
        while True:
            async with self._connection() as conn:
                deleted = await event_queries.AsyncQuerier(conn).event_prune(
                    older_than=older_than, batch_size=batch_size, now=now
                )
            total += deleted
            if deleted < batch_size:
                return total

    # -- retention: one bounded batch per call; the maintenance service paces them ---------

    async def purge_finished_batch(
        self,
        state: JobState,
        older_than: timedelta,
        limit: int = 1000,
        *,
        now: datetime | None = None,
    ) -> int:
        """Delete up to ``limit`` jobs that finished in ``state`` more than ``older_than`` ago.

        One short transaction: the oldest such jobs go first, with their
        events; rows another transaction holds are skipped (SKIP LOCKED), and
        the effect ledger keeps its rows. ``state`` is a terminal state. Age is
        measured from database now, or from ``now`` when given (tests pin it).
        Returns how many jobs it deleted: fewer than ``limit`` means none is left.
        """
        _base.check_older_than(older_than)
        _base.check_batch_limit(limit)
        if state not in _base.FINISHED_STATES:
            raise ConfigurationError(f"only finished jobs are purged, not {state.value!r} ones")
        async with self._connection() as conn:
            return await job_queries.AsyncQuerier(conn).job_purge_state(
                state=models.JobState(state.value),
                older_than=older_than,
                batch_size=limit,
                now=now,
            )

    async def prune_events_batch(
        self, older_than: timedelta, limit: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete, of the ``limit`` oldest events, those older than ``older_than``.

        One short statement that walks the events in id order (no index on
        their time: every event would pay for one). Returns how many it
        deleted: fewer than ``limit`` means the oldest events left are young
        enough to keep (an old event behind a younger one waits for it).
        """
        _base.check_older_than(older_than)
        _base.check_batch_limit(limit)
        async with self._connection() as conn:
            return await event_queries.AsyncQuerier(conn).event_prune(
                older_than=older_than, batch_size=limit, now=now
            )

    async def prune_effects_batch(
        self, older_than: timedelta, limit: int = 5000, *, now: datetime | None = None
    ) -> int:
        """Delete up to ``limit`` ledger rows older than ``older_than`` no job needs.

        One short statement (see :meth:`prune_effects` for why the ledger
        outlives its jobs). Returns how many it deleted: fewer than ``limit``
        means none is left.
        """
        _base.check_older_than(older_than)
        _base.check_batch_limit(limit)
        async with self._connection() as conn:
            return await effect_queries.AsyncQuerier(conn).effect_prune(
                older_than=older_than, batch_size=limit, now=now
            )

    async def refresh_statistics(self) -> list[str]:
        """Analyze each of jobrun's growing tables that has outgrown its statistics.

        A table has outgrown them when it holds more than twice the rows (and
        a thousand more) it held when last analyzed. Every session plans a
        prepared statement once and keeps that plan; planned on a nearly empty
        table, the claim reads the whole table on every call once it is large,
        until new statistics make the sessions plan again. Autovacuum's
        analyze gets there within its naptime; this gets there on a server
        that runs without it, and sooner. A table someone else is vacuuming
        or analyzing right now (autovacuum) is skipped, not waited for, and
        left for the next call. Returns the tables analyzed.
        """
        async with self._connection() as conn:
            queries = system_queries.AsyncQuerier(conn)
            outgrown = await queries.tables_outgrowing_statistics()
            if not outgrown:
                return []
            for table in outgrown:
                await _ANALYZE[table](queries)
            # A skipped table still describes fewer rows than it holds.
            skipped = set(await queries.tables_outgrowing_statistics())
        return [table for table in outgrown if table not in skipped]


_ANALYZE = {
    "jobs": system_queries.AsyncQuerier.analyze_jobs,
    "job_events": system_queries.AsyncQuerier.analyze_job_events,
    "processed_effects": system_queries.AsyncQuerier.analyze_processed_effects,
}
"""The statement that analyzes each table TablesOutgrowingStatistics can name."""


class _CallbackFailed(Exception):
    """One commit callback of a group raised; the group's transaction rolls back."""

    def __init__(self, outcome: Outcome, error: Exception) -> None:
        super().__init__(str(error))
        self.outcome = outcome
        self.error = error


_OUTCOMES = {kind: models.JobOutcome(kind.value) for kind in OutcomeKind}


def _as_exception(exc: BaseException) -> Exception:
    if isinstance(exc, Exception):
        return exc
    raise exc
