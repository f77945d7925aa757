"""Run one job's handler the way a worker would, without a worker or a database.

:func:`run_job` looks the handler up in a :class:`~jobrun.registry.Registry`,
gives it a real :class:`~jobrun.registry.JobContext`, validates the payload
through the handler's declared type (:meth:`Handler.parse_payload
<jobrun.registry.Handler.parse_payload>`, the worker's own path), runs it (an
``async def`` on the loop, a plain ``def`` in a thread, as the worker does)
within its timeout, and reports what the worker would hand the store: a
completion with the commit callback (captured, not run), a failure, a cancel
(``raise Cancel``) or a snooze (``raise Snooze``).

What it leaves out is everything around the handler: no lease, no heartbeat,
no retry, no store. The captured commit callback can be run on a connection
the test provides (:meth:`JobResult.commit_with`), in a transaction as the
store would run it. The worker's executor is not reused (it is bound to the
worker's lease bookkeeping), so the rules mirrored here are kept short:
unknown type, payload validation, Cancel, Snooze, timeout, other exceptions,
and a return value that is not a callback.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from jobrun._threads import DaemonThreadPool
from jobrun.errors import HandlerTimedOut, InvalidJob, JobrunError, UnknownJobType
from jobrun.job import CommitCallback, Job, NewJob, OutcomeKind
from jobrun.registry import (
    Cancel,
    CancellationToken,
    Handler,
    InvalidPayload,
    JobContext,
    Registry,
    Snooze,
)
from jobrun.testing.factory import make_job

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


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, JobrunError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


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


async def _invoke(handler: Handler, ctx: JobContext, payload: Any, limit: float | None) -> Any:
    loop = asyncio.get_running_loop()
    threads: DaemonThreadPool | None = None
    if handler.is_async:
        call: asyncio.Future[Any] = asyncio.ensure_future(
            cast(Awaitable[Any], handler.func(ctx, payload))
        )
    else:
        threads = DaemonThreadPool(1, name_prefix="jobrun-testing")
        call = asyncio.wrap_future(threads.submit(handler.func, ctx, payload))
    expired = False

    def expire() -> None:
        # Like the worker: the token first, then (async only) the cancellation;
        # a thread cannot be interrupted, so a sync handler runs on until it returns.
        nonlocal expired
        expired = True
        ctx.token.set("timeout")
        if handler.is_async:
            call.cancel()

    timer = None if limit is None else loop.call_later(limit, expire)
    try:
        result = await call
    except asyncio.CancelledError:
        if not expired:
            raise
    finally:
        if timer is not None:
            timer.cancel()
        if threads is not None:
            threads.shutdown()
    if expired:
        # Also when the handler swallowed the cancellation: the attempt timed out.
        raise HandlerTimedOut(handler.type, limit or 0.0)
    return result


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
) -> JobResult:
    """Run the handler of ``job`` as a worker would and report how it ended.

    ``job`` is a job type (with ``payload``: plain data, or a model instance
    that goes through the handler's payload type like
    :meth:`Registry.new_job <jobrun.registry.Registry.new_job>`), a
    :class:`~jobrun.job.NewJob`, or a :class:`~jobrun.job.Job` (see
    :func:`~jobrun.testing.make_job`). ``attempt`` is the attempt number the
    handler sees (``ctx.attempt``; by default the Job's own, else 1).
    ``token`` lets the test cancel the run (set it from another task or
    thread). ``timeout`` (seconds or a
    timedelta) defaults to the handler's own; past it the token is set, an
    async handler is cancelled and the attempt fails with
    :class:`HandlerTimedOut`.

    Never raises for what the handler does (exceptions become a failed
    result), only for a misuse of run_job itself (a payload that is not
    JSON, a payload beside a Job).
    """
    built = _build_job(registry, job, payload, attempt)
    if isinstance(timeout, int | float):
        timeout = timedelta(seconds=timeout)
    ctx = JobContext(built, token)
    handler = registry.get(built.type)
    error: Exception
    if handler is None:
        error = UnknownJobType(built.type)
        return JobResult(built, OutcomeKind.FAIL, error=error, detail=_one_line(error))
    limit = timeout or handler.timeout
    parsed: Any = None
    try:
        parsed = handler.parse_payload(built)
        commit = await _invoke(
            handler, ctx, parsed, None if limit is None else limit.total_seconds()
        )
    except Cancel as exc:
        return JobResult(built, OutcomeKind.CANCEL, error=exc, detail=exc.reason, payload=parsed)
    except Snooze as exc:
        return JobResult(built, OutcomeKind.SNOOZE, error=exc, delay=exc.delay, payload=parsed)
    except Exception as exc:
        return JobResult(built, OutcomeKind.FAIL, error=exc, detail=_one_line(exc), payload=parsed)
    if commit is not None and not callable(commit):
        error = TypeError(
            f"handler for {built.type!r} returned {type(commit).__name__}, "
            "expected a commit callback or None"
        )
        return JobResult(built, OutcomeKind.FAIL, error=error, detail=str(error), payload=parsed)
    return JobResult(built, OutcomeKind.COMPLETE, commit=commit, payload=parsed)


def run_job_sync(
    registry: Registry,
    job: Job | NewJob | str,
    payload: Any = _UNSET,
    *,
    attempt: int | None = None,
    token: CancellationToken | None = None,
    timeout: timedelta | float | None = None,
) -> JobResult:
    """:func:`run_job` for tests without an event loop; the same arguments and result.

    Runs its own event loop (``asyncio.run``), so it cannot be called from a
    coroutine; there, ``await run_job(...)``.
    """
    return asyncio.run(
        run_job(registry, job, payload, attempt=attempt, token=token, timeout=timeout)
    )
