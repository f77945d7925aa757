"""The executor: one claimed job in, one :class:`~jobrun.domain.Outcome` out.

It finds the job's handler, validates the payload through the handler's
declared type, runs the handler (an ``async def`` on the loop, a plain
``def`` on a daemon thread, :class:`~jobrun._threads.DaemonThreadPool`)
within its timeout, and says how the attempt ended:

* the handler returned: a completion. What it returned is a commit callback
  (with the ``ctx.lock`` keys the callback needs), a JSON value to store as
  the job's result (checked as a payload is, within ``max_result_bytes``),
  a :class:`~jobrun.domain.Result` holding both, or None;
* it raised :class:`~jobrun.registry.Cancel` or :class:`~jobrun.registry.Snooze`:
  a cancel or a snooze;
* it raised anything else, or returned a value that cannot be stored (not
  JSON, too large, not of its declared result type): a failure, retried on
  the job's own backoff;
* the type has no handler or the payload does not validate: a failure on the
  bounded policy of :mod:`jobrun.unrunnable` (the handler never runs);
* it was stopped (:meth:`~jobrun.worker.attempt.Attempt.stop`: a timeout, a
  cancel or lost lease seen by the heartbeat, a shutdown): the stop's
  outcome, whatever the handler did after.

A timeout sets the attempt's cancellation token *before* cancelling an async
handler, so the handler sees both at once; a sync handler's thread cannot be
interrupted, so its attempt ends only when the thread returns.

While a handler runs, :data:`jobrun.telemetry.hooks.current_job` holds its job (for
:class:`jobrun.telemetry.hooks.JobLogFilter`; a sync handler's thread runs in a copy
of the attempt's context), and with ``opentelemetry-api`` installed the
attempt runs in the span ``"jobrun.job"`` (:mod:`jobrun.telemetry.tracing`).

The worker runs every attempt through it, and so does
:func:`jobrun.testing.run_job`: a handler under test runs through the same
code as in production. It never touches the store: recording the outcome is
the reporter's (:mod:`jobrun.worker.reporter`).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from datetime import timedelta
from typing import Any

from jobrun._threads import DaemonThreadPool
from jobrun.domain import (
    DEFAULT_MAX_RESULT_BYTES,
    CommitCallback,
    Job,
    Outcome,
    OutcomeKind,
    Result,
    encode_payload,
)
from jobrun.errors import HandlerTimedOut, InvalidPayload, JobrunError, UnknownJobType
from jobrun.handler_context import DependencyReader
from jobrun.registry import Cancel, CancellationToken, JobContext, Registry, Snooze
from jobrun.telemetry.hooks import current_job
from jobrun.telemetry.tracing import job_span
from jobrun.unrunnable import DEFAULT_UNRUNNABLE, UnrunnableRetry
from jobrun.worker.attempt import (
    STOP_SHUTDOWN,
    STOP_TIMEOUT,
    Attempt,
    error_text,
    one_line,
)

__all__ = ["JobExecutor"]


class _Unrunnable(Exception):
    """This worker cannot run the job (no handler, a payload that does not validate)."""

    def __init__(self, cause: JobrunError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class JobExecutor:
    """Runs the handlers of ``registry``, sync ones on at most ``threads`` daemon threads.

    ``job_timeout`` limits each attempt whose handler sets no timeout of its own.
    A job it cannot run (its type has no handler, its payload does not validate)
    fails on ``unrunnable`` (:mod:`jobrun.unrunnable`): a few attempts, spaced
    for a rolling deploy, then dead. A returned value larger than
    ``max_result_bytes`` as JSON fails its attempt. ``dependencies`` reads a
    job's dependencies for its handler (``ctx.dependencies()``); without it,
    a handler reads none.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        job_timeout: timedelta | None = None,
        threads: int = 10,
        thread_name_prefix: str = "jobrun-handler",
        unrunnable: UnrunnableRetry = DEFAULT_UNRUNNABLE,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        dependencies: DependencyReader | None = None,
    ) -> None:
        self._registry = registry
        self._read_dependencies = dependencies
        self._max_result_bytes = max_result_bytes
        self._job_timeout = job_timeout
        self._unrunnable = unrunnable
        self._max_threads = threads
        self._thread_name_prefix = thread_name_prefix
        self._threads: DaemonThreadPool | None = None

    def attempt(
        self,
        job: Job,
        *,
        token: CancellationToken | None = None,
        timeout: timedelta | None = None,
    ) -> Attempt:
        """A new attempt of ``job``, with its handler, context and time limit.

        ``timeout`` overrides the handler's own limit (``jobrun.testing.run_job``
        takes one); by default the handler's, else the executor's ``job_timeout``.
        """
        handler = self._registry.get(job.type)
        limit = timeout or (handler.timeout if handler is not None else None) or self._job_timeout
        ctx = JobContext(job, token, dependencies=self._read_dependencies)
        return Attempt(job=job, handler=handler, ctx=ctx, started=time.monotonic(), timeout=limit)

    def shutdown(self) -> None:
        """Stop the handler threads once idle; threads still running are not waited for."""
        if self._threads is not None:
            self._threads.shutdown()

    async def execute(self, run: Attempt) -> Outcome | None:
        """Run ``run``'s handler and return its attempt's outcome.

        Runs as ``run.task`` (its own task: the job's log context and span stay
        in it). Returns None for an attempt left leased at shutdown (reporting
        anything would free the job while its thread may still run it). A
        cancellation not asked for through :meth:`Attempt.stop
        <jobrun.worker.attempt.Attempt.stop>` propagates.
        """
        run.entered = True
        job = run.job
        returned: Any = None
        ended: Outcome | None = None
        # This task's own context: handler logs (and a sync handler's thread) see the job.
        current_job.set(job)
        try:
            if run.stop_reason is None:
                with job_span(job, ok=(Cancel, Snooze, asyncio.CancelledError)):
                    returned = await self._invoke(run)
        except asyncio.CancelledError:
            if run.left:
                return None
            if run.stop_reason is None:
                raise
            # Ours: report the stop instead of dying with the task.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        except Cancel as exc:
            run.error = exc
            ended = Outcome(job=job, kind=OutcomeKind.CANCEL, detail=exc.reason)
        except Snooze as exc:
            run.error = exc
            ended = Outcome(job=job, kind=OutcomeKind.SNOOZE, delay=exc.delay)
        except _Unrunnable as exc:
            run.error = exc.cause
            ended = self._unrunnable.outcome(job, str(exc))
        except JobrunError as exc:
            run.error = exc
            ended = Outcome(job=job, kind=OutcomeKind.FAIL, detail=str(exc))
        except Exception as exc:
            run.error = exc
            run.reason = one_line(exc)
            ended = Outcome(job=job, kind=OutcomeKind.FAIL, detail=error_text(exc))
        if run.stop_reason is not None:
            # Also when the handler swallowed the cancellation or ignored the
            # token: the job was stopped all the same, so its result is discarded.
            return self._stopped(run)
        if ended is not None:
            return ended
        return self._completion(run, returned)

    def _completion(self, run: Attempt, returned: Any) -> Outcome:
        """The completion a handler's return value asks for, or the failure it causes."""
        job = run.job
        commit: CommitCallback | None = None
        value = returned
        if isinstance(returned, Result):
            value, commit = returned.value, returned.commit
        elif callable(returned):
            value, commit = None, returned
        try:
            if commit is not None and not callable(commit):
                raise TypeError(
                    f"handler for {job.type!r} returned a Result whose commit is "
                    f"{type(commit).__name__}, expected a commit callback or None"
                )
            text = None
            if value is not None:
                # run.handler is set: a job without one ended unrunnable above.
                assert run.handler is not None
                stored = run.handler.result_json(value)
                text = encode_payload(job.type, stored, self._max_result_bytes, "result")
        except (TypeError, ValueError) as exc:
            run.error = exc
            run.reason = message = one_line(exc)
            return Outcome(job=job, kind=OutcomeKind.FAIL, detail=message)
        keys = run.ctx.lock_keys if commit is not None else ()
        return Outcome(job=job, commit=commit, lock_keys=keys, result=text)

    async def _invoke(self, run: Attempt) -> Any:
        handler = run.handler
        if handler is None:
            raise _Unrunnable(UnknownJobType(run.job.type))
        try:
            payload = run.payload = handler.parse_payload(run.job)
        except InvalidPayload as exc:
            raise _Unrunnable(exc) from None
        if handler.is_async:
            call: Any = handler.func(run.ctx, payload)
        else:
            if self._threads is None:
                self._threads = DaemonThreadPool(
                    self._max_threads, name_prefix=self._thread_name_prefix
                )
            # In a copy of this task's context: the job's log context and span go along.
            run.thread = self._threads.submit(
                contextvars.copy_context().run, handler.func, run.ctx, payload
            )
            call = asyncio.wrap_future(run.thread)
        if run.timeout is None:
            return await call
        # A timer rather than asyncio.timeout: expiry goes through Attempt.stop,
        # which sets the token *before* cancelling, so the handler sees both at once.
        timer = asyncio.get_running_loop().call_later(
            run.timeout.total_seconds(), run.stop, STOP_TIMEOUT
        )
        try:
            return await call
        finally:
            timer.cancel()

    @staticmethod
    def _stopped(run: Attempt) -> Outcome:
        job = run.job
        if run.stop_reason == STOP_TIMEOUT:
            seconds = run.timeout.total_seconds() if run.timeout else 0.0
            run.error = HandlerTimedOut(job.type, seconds)
            return Outcome(job=job, kind=OutcomeKind.FAIL, detail=str(run.error))
        if run.stop_reason == STOP_SHUTDOWN:
            reason = "handed back: the worker shut down before the job finished"
            return Outcome(job=job, kind=OutcomeKind.RELEASE, detail=reason)
        # A requested cancel ends it cancelled; a lost lease makes it LeaseLost.
        detail = "stopped: the job was cancelled or its lease was lost"
        return Outcome(job=job, kind=OutcomeKind.FAIL, detail=detail)
