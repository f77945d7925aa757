"""The Store's completion methods: outcomes recorded in groups, with their effects and callbacks."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, cast

import psycopg

from jobrun.domain import (
    CommitCallback,
    Effect,
    Job,
    Outcome,
    OutcomeKind,
    key_lock_id,
)
from jobrun.errors import (
    LeaseLost,
)
from jobrun.postgres import deadlines
from jobrun.postgres.outcome_rows import OutcomeRowMethods
from jobrun.postgres.store_core import log
from jobrun.sqlc import effects as effect_queries
from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc import locks as lock_queries

__all__ = ["CompletionMethods"]


class CompletionMethods(OutcomeRowMethods):
    """Recording outcomes, mixed into :class:`jobrun.postgres.store.Store`."""

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
        # The concurrency keys whose slots the ended jobs gave up (migration 00020).
        freed: set[str] = set()
        plain = [o for o in outcomes if o.commit is None or o.kind is not OutcomeKind.COMPLETE]
        pending = [o for o in outcomes if o.commit is not None and o.kind is OutcomeKind.COMPLETE]
        if plain:
            freed |= await self._record_plain(owner, plain, results)
        while pending:
            try:
                freed |= await self._complete_group(owner, pending, results)
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
                        freed |= await self._complete_group(owner, [outcome], results)
                    except _CallbackFailed as failed:
                        results[outcome.job.id.int] = failed.error
                    except Exception as single:
                        results[outcome.job.id.int] = _as_exception(single)
                break
        if freed:
            await self._admit_after_completion(freed)
        return [results[o.job.id.int] for o in outcomes]

    async def _complete_group(
        self, owner: str, group: Sequence[Outcome], results: dict[int, Job | Exception]
    ) -> set[str]:
        outcome: dict[int, Job | Exception] = {}
        # The callback running right now, if any: the one a timeout blames.
        running: list[Outcome] = []
        # The wall-clock bound starts once the connection is ours: waiting for
        # the pool is PoolExhausted's business, not the commit timeout's.
        deadline = deadlines.CommitDeadline(self.commit_timeout)
        try:
            # Pipeline mode: statements whose results nobody reads yet (the
            # timeout, each callback's writes) travel with the next read, so a
            # group of N callbacks costs a handful of round trips, not N + 5.
            async with self._with_tx() as tx, deadline, tx.pipeline() as pipeline:
                try:
                    freed = await self._complete_group_in(
                        tx, owner, group, outcome, deadline, running
                    )
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
        return freed

    async def _complete_group_in(
        self,
        tx: psycopg.AsyncConnection[Any],
        owner: str,
        group: Sequence[Outcome],
        results: dict[int, Job | Exception],
        deadline: deadlines.CommitDeadline,
        running: list[Outcome],
    ) -> set[str]:
        """Complete ``group`` in ``tx``; the concurrency keys whose slots it freed."""
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
        freed = await self._record(queries, owner, ordered, results)
        kept = [o for o in ordered if not isinstance(results.get(o.job.id.int), LeaseLost)]
        if not kept:
            return freed
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
        return freed


class _CallbackFailed(Exception):
    """One commit callback of a group raised; the group's transaction rolls back."""

    def __init__(self, outcome: Outcome, error: Exception) -> None:
        super().__init__(str(error))
        self.outcome = outcome
        self.error = error


def _as_exception(exc: BaseException) -> Exception:
    if isinstance(exc, Exception):
        return exc
    raise exc
