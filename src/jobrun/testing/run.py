"""Run one job's handler the way a worker would, without a worker or a database.

:func:`run_job` looks the handler up in a :class:`~jobrun.registry.Registry`
and runs it through the worker's own executor
(:class:`jobrun.worker.executor.JobExecutor`): a real
:class:`~jobrun.registry.JobContext`, the payload validated through the
handler's declared type, an ``async def`` on the loop and a plain ``def`` in
a thread, the timeout applied as in production (the token set before the
cancel). It reports what the worker would hand the store: a completion with
the commit callback (captured, not run), a failure, a cancel (``raise
Cancel``) or a snooze (``raise Snooze``).

What it leaves out is everything around the handler: no lease, no heartbeat,
no retry, no store. The captured commit callback can be run on a connection
the test provides (:meth:`JobResult.commit_with`), in a transaction as the
store would run it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import UUID

from jobrun.domain import CommitCallback, Dependency, Job, NewJob, OutcomeKind
from jobrun.errors import HandlerTimedOut, InvalidJob
from jobrun.registry import CancellationToken, InvalidPayload, Registry
from jobrun.testing.factory import make_job
from jobrun.worker.attempt import one_line
from jobrun.worker.executor import JobExecutor

__all__ = ["HandlerTimedOut", "JobResult", "run_job", "run_job_sync"]

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class JobResult:
    """How one run of a handler ended, and so what a worker would do with the job.

    ``kind`` is the outcome the worker would report: ``complete`` (the job
    succeeds, ``commit`` runs in the completion transaction), ``fail`` (retried
    on its backoff, or dead), ``cancel`` or ``snooze`` (queued again after
    ``delay``, the attempt not counted). ``error`` is what the handler raised
    (a Cancel or Snooze included), ``detail`` its one-line reason.
    """

    job: Job
    """The job the handler ran, as it was given to it."""
    kind: OutcomeKind
    """The outcome a worker would report."""
    commit: CommitCallback | None = None
    """The commit callback the handler returned (completions only); not run yet."""
    error: BaseException | None = None
    """The exception the run ended with, or None when the handler returned."""
    detail: str = ""
    """A failure's or a cancel's reason, one line; empty for a completion."""
    delay: timedelta | None = None
    """A snooze's delay."""
    payload: Any = field(default=None, repr=False)
    """The payload as the handler received it (validated into its type), if it got that far."""
    progress: tuple[float, str] | None = None
    """The last progress the handler reported (``ctx.progress``), as ``(fraction, message)``."""
    result: Any = None
    """What the handler returned to be stored as the job's result, as the JSON value
    a client would read back (completions only; None when it returned nothing)."""

    def __repr__(self) -> str:
        # The whole Job would drown what a failing assertion needs to show.
        parts = [f"kind={self.kind.value!r}", f"type={self.job.type!r}", f"job_id={self.job.id}"]
        if self.commit is not None:
            parts.append("commit=<callback>")
        if self.error is not None:
            parts.append(f"error={self.error!r}")
        if self.delay is not None:
            parts.append(f"delay={self.delay!r}")
        return f"JobResult({', '.join(parts)})"

    @property
    def completed(self) -> bool:
        """True when the handler returned: the worker would complete the job."""
        return self.kind is OutcomeKind.COMPLETE

    @property
    def failed(self) -> bool:
        """True when the attempt failed (an exception, a bad payload, a timeout, ...)."""
        return self.kind is OutcomeKind.FAIL

    @property
    def cancelled(self) -> bool:
        """True when the handler raised :class:`~jobrun.registry.Cancel`."""
        return self.kind is OutcomeKind.CANCEL

    @property
    def snoozed(self) -> bool:
        """True when the handler raised :class:`~jobrun.registry.Snooze`."""
        return self.kind is OutcomeKind.SNOOZE

    def raise_for_failure(self) -> None:
        """Raise the handler's exception again if the attempt failed; otherwise do nothing.

        For tests that expect success and want the handler's own traceback
        when it did not come.
        """
        if self.kind is OutcomeKind.FAIL and self.error is not None:
            raise self.error

    async def commit_with(self, conn: Any) -> bool:
        """Run the captured commit callback on ``conn`` inside ``conn.transaction()``.

        ``conn`` is a ``psycopg.AsyncConnection`` the test provides (e.g. from
        the ``jobrun_pool`` fixture): on an autocommit connection the
        callback's writes commit together, as in the store's completion
        transaction; inside a transaction already open they are a savepoint.
        Returns False when the handler returned no callback. Raises
        AssertionError when the job did not complete, so there is nothing a
        worker would commit.
        """
        if self.kind is not OutcomeKind.COMPLETE:
            raise AssertionError(f"the job did not complete, nothing to commit: {self!r}")
        if self.commit is None:
            return False
        async with conn.transaction():
            await self.commit(conn)
        return True


def _build_job(
    registry: Registry, job: Job | NewJob | str, payload: Any, attempt: int | None
) -> Job:
    if isinstance(job, Job):
        if payload is not _UNSET:
            raise TypeError("run_job: give the payload inside the Job, not beside it")
        if attempt is None or attempt == job.attempts:
            return job
        return job.model_copy(update={"attempts": attempt})
    attempt = 1 if attempt is None else attempt
    if isinstance(job, NewJob):
        if payload is not _UNSET:
            raise TypeError("run_job: give the payload inside the NewJob, not beside it")
        return make_job(job, attempts=attempt)
    if payload is _UNSET:
        payload = {}
    handler = registry.get(job)
    if handler is not None and handler.adapter is not None:
        # A producer goes through the handler's type (Registry.new_job); a
        # payload that does not validate is stored as given, so it fails the
        # way the worker fails it.
        try:
            return make_job(registry.new_job(job, payload), attempts=attempt)
        except InvalidPayload:
            pass
    try:
        return make_job(NewJob(type=job, payload=payload), attempts=attempt)
    except InvalidJob as exc:
        raise TypeError(f"run_job: the payload of {job!r} is not JSON: {exc}") from None


async def run_job(
    registry: Registry,
    job: Job | NewJob | str,
    payload: Any = _UNSET,
    *,
    attempt: int | None = None,
    token: CancellationToken | None = None,
    # The handler's time limit, applied as the worker applies it (the token set
    # before the cancel), which asyncio.timeout around the call could not do.
    timeout: timedelta | float | None = None,  # noqa: ASYNC109
    dependencies: Sequence[Dependency] = (),
) -> JobResult:
    """Run the handler of ``job`` as a worker would and report how it ended.

    ``job`` is a job type (with ``payload``: plain data, or a model instance
    that goes through the handler's payload type like
    :meth:`Registry.new_job <jobrun.registry.Registry.new_job>`), a
    :class:`~jobrun.domain.NewJob`, or a :class:`~jobrun.domain.Job` (see
    :func:`~jobrun.testing.make_job`). ``attempt`` is the attempt number the
    handler sees (``ctx.attempt``; by default the Job's own, else 1).
    ``token`` lets the test cancel the run (set it from another task or
    thread). ``timeout`` (seconds or a
    timedelta) defaults to the handler's own; past it the token is set, an
    async handler is cancelled and the attempt fails with
    :class:`HandlerTimedOut`. ``dependencies`` is what the handler's
    ``ctx.dependencies()`` returns (a group's callback under test reads its
    parts there; build them with :class:`~jobrun.domain.Dependency`).

    Never raises for what the handler does (exceptions become a failed
    result), only for a misuse of run_job itself (a payload that is not
    JSON, a payload beside a Job).
    """
    built = _build_job(registry, job, payload, attempt)
    if isinstance(timeout, int | float):
        timeout = timedelta(seconds=timeout)
    given = list(dependencies)

    async def read_dependencies(job_id: UUID) -> list[Dependency]:
        return list(given)

    executor = JobExecutor(
        registry,
        threads=1,
        thread_name_prefix="jobrun-testing",
        dependencies=read_dependencies,
    )
    run = executor.attempt(built, token=token, timeout=timeout)
    # Its own task, as in the worker: the job's log context stays in it, and a
    # timeout cancels it (an async handler) after setting the token.
    run.task = asyncio.get_running_loop().create_task(executor.execute(run))
    try:
        outcome = await run.task
    finally:
        executor.shutdown()
    assert outcome is not None  # only an attempt left at a worker's shutdown has none
    kind, error = outcome.kind, run.error
    said = {"payload": run.payload, "progress": run.ctx.reported}
    if kind is OutcomeKind.COMPLETE:
        stored = None if outcome.result is None else json.loads(outcome.result)
        return JobResult(built, kind, commit=outcome.commit, result=stored, **said)
    detail = outcome.detail
    if kind is OutcomeKind.FAIL:
        # The reason on one line, where the worker stores a whole traceback.
        detail = run.reason or (one_line(error) if error is not None else detail)
    if kind is OutcomeKind.SNOOZE:
        return JobResult(built, kind, error=error, delay=outcome.delay, **said)
    return JobResult(built, kind, error=error, detail=detail, **said)


def run_job_sync(
    registry: Registry,
    job: Job | NewJob | str,
    payload: Any = _UNSET,
    *,
    attempt: int | None = None,
    token: CancellationToken | None = None,
    timeout: timedelta | float | None = None,
    dependencies: Sequence[Dependency] = (),
) -> JobResult:
    """:func:`run_job` for tests without an event loop; the same arguments and result.

    Runs its own event loop (``asyncio.run``), so it cannot be called from a
    coroutine; there, ``await run_job(...)``.
    """
    return asyncio.run(
        run_job(
            registry,
            job,
            payload,
            attempt=attempt,
            token=token,
            timeout=timeout,
            dependencies=dependencies,
        )
    )
