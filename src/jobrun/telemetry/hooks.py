"""Hooks for what jobrun does, and the job a log record was emitted for.

:class:`Observer` is the one interface the store, the worker and the reaper
report to: jobs enqueued, claimed, finished, reaped. Its methods do nothing;
an implementation overrides the ones it needs
(:class:`jobrun.telemetry.prometheus.PrometheusObserver` counts them for
Prometheus). Nothing here imports a metrics library, and a component without
an observer skips the calls altogether, so the hooks cost the no-op path one
``is None`` test per batch.

While a handler runs, :data:`current_job` holds its job (a contextvar: set by
the worker in the job's own task and copied into a sync handler's thread), so
any log record emitted inside the handler, by any logger, can say which job it
belongs to. :class:`JobLogFilter` adds ``job_id``, ``job_type``, ``queue`` and
``attempt`` to such records; ``jobrun worker`` installs it on its log handler,
and a service embedding jobrun adds it to its own handlers::

    handler.addFilter(jobrun.telemetry.JobLogFilter())
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextvars import ContextVar

from jobrun.domain import Job

__all__ = ["FINISHED_OUTCOMES", "JobLogFilter", "Observer", "current_job"]

FINISHED_OUTCOMES = (
    "succeeded",
    "failed",
    "dead",
    "cancelled",
    "snoozed",
    "handed_back",
    "lease_lost",
)
"""The ``outcome`` values :meth:`Observer.finished` receives.

``failed`` is a failed attempt that will be retried, ``dead`` a failed
attempt with none left; ``handed_back`` is a job given back at shutdown,
``lease_lost`` one whose lease had already gone (the reaper decides it).
"""

current_job: ContextVar[Job | None] = ContextVar("jobrun_current_job", default=None)
"""The job whose handler is running in this context; None outside handlers."""


class Observer:
    """Receives jobrun's events; every method is a no-op unless overridden.

    Calls come from the event loop (the reaper, the worker, the async store)
    or from a sync producer's thread, so an implementation must be cheap and
    thread-safe. It must never raise: the callers do not guard the calls.
    """

    def enqueued(self, jobs: Sequence[Job]) -> None:
        """``jobs`` were inserted (idempotent replays are not reported)."""

    def claimed(self, jobs: Sequence[Job]) -> None:
        """``jobs`` were claimed; each one's ``updated_at`` is the claim time (db clock)."""

    def finished(self, job: Job, outcome: str, run_seconds: float) -> None:
        """An attempt of ``job`` ended as ``outcome`` after ``run_seconds`` of handler time.

        ``outcome`` is one of :data:`FINISHED_OUTCOMES`.
        """

    def reaped(self, jobs: Sequence[Job]) -> None:
        """Expired leases were failed; ``jobs`` as the reaper left them (queued, dead...)."""


class JobLogFilter(logging.Filter):
    """Adds ``job_id``, ``job_type``, ``queue`` and ``attempt`` to records emitted in handlers.

    Attach it to a :class:`logging.Handler` (filters on a handler see the
    records of every logger that reaches it). Records emitted outside a
    handler pass unchanged; fields a record already has are kept.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate ``record`` when a handler is running; never drops a record."""
        job = current_job.get()
        if job is not None:
            fields = record.__dict__
            if "job_id" not in fields:
                fields["job_id"] = str(job.id)
            fields.setdefault("job_type", job.type)
            fields.setdefault("queue", job.queue)
            fields.setdefault("attempt", job.attempts)
        return True
