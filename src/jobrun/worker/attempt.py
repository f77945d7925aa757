"""One attempt of a job while a worker holds it, how it is stopped, and how it reads in logs.

An :class:`Attempt` is made by the executor (:mod:`jobrun.worker.executor`)
for each job a worker starts, and lives until its outcome is recorded. The
executor runs it; the heartbeat, the shutdown and a timeout stop it
(:meth:`Attempt.stop`); the reporter logs how it ended (:func:`log_fields`).
"""

from __future__ import annotations

import asyncio
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobrun.domain import Job
from jobrun.errors import JobrunError
from jobrun.registry import Handler, JobContext

__all__ = [
    "STOP_CANCELLED",
    "STOP_SHUTDOWN",
    "STOP_TIMEOUT",
    "Attempt",
    "error_text",
    "log_fields",
    "one_line",
]

STOP_CANCELLED = "cancelled"
"""Stopped because the job was cancelled or its lease was lost (the heartbeat)."""
STOP_SHUTDOWN = "shutdown"
"""Stopped because the worker shuts down: the job is handed back."""
STOP_TIMEOUT = "timeout"
"""Stopped because the attempt ran past its timeout: a failure."""

# The jobs.last_error column holds at most 8192 characters; keep the end of a
# traceback, where the exception is, when it is longer.
_MAX_ERROR = 8000


@dataclass(slots=True, eq=False)
class Attempt:
    """A claimed job while a worker holds it."""

    job: Job
    handler: Handler | None
    ctx: JobContext
    started: float
    # The attempt's time limit (the handler's own, else the worker's); None: none.
    timeout: timedelta | None = None
    # The task running the executor for it.
    task: asyncio.Task[Any] | None = None
    # The sync handler's thread, while it runs or after; None for async handlers.
    thread: Future[Any] | None = None
    # Left leased at shutdown because its handler thread would not stop: never reported.
    left: bool = False
    # Why the worker itself stopped the job (cancelled, shutdown); None while it runs freely.
    stop_reason: str | None = None
    # True once the handler has finished and the outcome is being reported (a
    # completion or a fail): it can no longer be cancelled, only reported.
    reporting: bool = False
    # True once the task has begun executing. A task cancelled before its first
    # step never runs the coroutine, so nothing would report the job or free
    # its slot: such a run is stopped through stop_reason alone.
    entered: bool = False
    # Seconds the handler ran (from start to the end of the handler), for metrics.
    ran: float = 0.0
    # The payload as the handler received it, once validated.
    payload: Any = None
    # The exception the attempt ended with: the handler's, or the executor's
    # (UnknownJobType, HandlerTimedOut, a TypeError for a bad return value).
    error: BaseException | None = None
    # Why the attempt failed, on one line, when the outcome's detail does not
    # say it on one line (a traceback); "" otherwise.
    reason: str = ""
    # The job's next attempt, claimed by this worker while this run still
    # reported its outcome (a snooze or retry without delay commits the job as
    # queued, and a claim can return it before this run has left the table).
    successor: Job | None = None
    # The progress report (ctx.reported) the last heartbeat wrote, compared by
    # identity: each report is a new tuple, so a newer one is always sent.
    progress_sent: tuple[float, str] | None = None

    def stop(self, reason: str) -> None:
        """Ask the handler to stop: the token first, then (async handlers) the task.

        ``reason`` is one of the ``STOP_*`` constants. The attempt's outcome is
        then the stop's, whatever the handler does (see
        :meth:`jobrun.worker.executor.JobExecutor.execute`).
        """
        if self.reporting:
            return
        sync = self.handler is not None and not self.handler.is_async
        if self.stop_reason is not None:
            if reason == STOP_SHUTDOWN and self.task is not None and not sync and self.entered:
                # Already stopping (an async handler that swallowed a cancel): insist.
                self.task.cancel()
            return
        self.stop_reason = reason
        self.ctx.token.set(reason)
        if self.task is None or not self.entered:
            # Not begun: the executor sees stop_reason, skips the handler and reports.
            return
        # A sync handler's thread cannot be interrupted: whatever the reason, the
        # job keeps its lease (and slot) until the handler notices the token and
        # returns; a shutdown that cannot wait leaves the job to its lease.
        if not sync:
            self.task.cancel()

    @property
    def thread_running(self) -> bool:
        """Whether a sync handler's thread still runs the handler."""
        return self.thread is not None and not self.thread.done() and not self.reporting


def log_fields(attempt: Attempt, owner: str, *, outcome: str) -> dict[str, Any]:
    """The structured fields of a log line about ``attempt`` (``extra=``)."""
    return {
        "job_id": str(attempt.job.id),
        "job_type": attempt.job.type,
        "queue": attempt.job.queue,
        "attempt": attempt.job.attempts,
        "owner": owner,
        "duration_ms": round((time.monotonic() - attempt.started) * 1000, 3),
        "outcome": outcome,
    }


def one_line(exc: BaseException) -> str:
    """The reason ``exc`` gives, on one line; the type too unless it is one of jobrun's."""
    text = " ".join(str(exc).split())
    if isinstance(exc, JobrunError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def error_text(exc: BaseException) -> str:
    """``exc``'s traceback as a job's stored error, its end kept when it is too long."""
    text = "".join(traceback.format_exception(exc)).strip()
    if len(text) > _MAX_ERROR:
        text = "...\n" + text[-(_MAX_ERROR - 4) :]
    return text
