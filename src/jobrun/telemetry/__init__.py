"""Telemetry: what jobrun tells the outside about the work it does.

- :mod:`jobrun.telemetry.hooks`: the :class:`Observer` interface the store,
  the worker and the reaper report to, the :data:`current_job` a handler runs
  for, and :class:`JobLogFilter`, which puts that job on every log record a
  handler emits. No dependency beyond the standard library.
- :mod:`jobrun.telemetry.prometheus`: Prometheus metrics and a worker's
  ``/metrics``, ``/healthz`` and ``/readyz`` (the ``jobrun[metrics]``
  extra); imported only when metrics are wanted.
- :mod:`jobrun.telemetry.tracing`: OpenTelemetry trace context from enqueue to
  the job's span (the ``jobrun[otel]`` extra; a no-op without it).

The hooks' names are importable from here (``from jobrun.telemetry import
JobLogFilter``); the other two modules are imported by name.
"""

from __future__ import annotations

from jobrun.telemetry.hooks import FINISHED_OUTCOMES, JobLogFilter, Observer, current_job

__all__ = ["FINISHED_OUTCOMES", "JobLogFilter", "Observer", "current_job"]
