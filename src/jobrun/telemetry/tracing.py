"""OpenTelemetry for jobrun, through ``opentelemetry-api`` only (bring your own SDK).

At enqueue, :func:`current_trace_meta` reads the current span's context and
returns it in W3C form (``traceparent``, and ``tracestate`` when there is
one); the store writes it to the job's ``meta`` column. When a worker runs
the job, :func:`job_span` starts the span ``"jobrun.job"`` as a child of that
context *and* linked to it, so the request that enqueued a job and the job
itself are one trace, and a backend that shows links still finds the producer
when the job runs hours later.

Without the ``jobrun[otel]`` extra (``opentelemetry-api`` not importable)
both are no-ops costing one global lookup. With the API but no SDK (no
tracer provider set) no current span is ever valid, so nothing is written at
enqueue, and the worker skips building no-op spans.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from jobrun.domain import Job

__all__ = ["SPAN_NAME", "current_trace_meta", "job_span", "tracing_available"]

SPAN_NAME = "jobrun.job"
"""The name of the span around each attempt of a job."""

_TRACER_NAME = "jobrun"
_otel: Any = None  # None: not looked up yet; False: not installed; else the loaded parts.


class _Otel:
    """The parts of opentelemetry-api jobrun uses, imported once."""

    def __init__(self) -> None:
        from opentelemetry import trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self.trace = trace
        self.propagator = TraceContextTextMapPropagator()
        self.link = trace.Link
        self.consumer = trace.SpanKind.CONSUMER
        self.error = trace.StatusCode.ERROR
        self.proxy_provider = trace.ProxyTracerProvider
        self.sdk = False
        self.env_provider = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
        # A ProxyTracer until an SDK sets a provider, then that provider's tracer.
        self.tracer = trace.get_tracer(_TRACER_NAME)


def _load() -> _Otel | None:
    global _otel
    if _otel is None:
        try:
            _otel = _Otel()
        except ImportError:
            _otel = False
    return _otel or None


def tracing_available() -> bool:
    """Whether ``opentelemetry-api`` is importable (the ``jobrun[otel]`` extra)."""
    return _load() is not None


def current_trace_meta() -> dict[str, str] | None:
    """The current span's W3C trace context as job meta, or None when there is none."""
    otel = _otel if _otel is not None else _load()
    if not otel:
        return None
    if not otel.trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    otel.propagator.inject(carrier)
    return carrier or None


_NO_SPAN = contextlib.nullcontext()


def job_span(
    job: Job, *, ok: tuple[type[BaseException], ...] = ()
) -> contextlib.AbstractContextManager[None]:
    """Run one attempt of ``job`` inside the span ``"jobrun.job"`` (``with job_span(job): ...``).

    The span is a child of the trace context stored at enqueue (a new trace
    when there was none) and links to it. An exception other than those in
    ``ok`` (jobrun's Cancel and Snooze are outcomes, not errors) is recorded
    on the span and sets its status to error; it is always re-raised.
    Without an SDK (no tracer provider set) no span is built: a no-op span
    would cost about 10 us per job for nothing.
    """
    otel = _otel if _otel is not None else _load()
    if not otel:
        return _NO_SPAN
    if not otel.sdk:
        # get_tracer_provider() reads the environment on every call (a few us
        # per job). Until a provider is set, the API's module global stays None:
        # reading it is free. (A provider named by OTEL_PYTHON_TRACER_PROVIDER is
        # only created by get_tracer_provider() itself, so then always ask.)
        if not otel.env_provider and getattr(otel.trace, "_TRACER_PROVIDER", None) is None:
            return _NO_SPAN
        if isinstance(otel.trace.get_tracer_provider(), otel.proxy_provider):
            return _NO_SPAN
        otel.sdk = True  # a global provider is set once and for all
    return _span(otel, job, ok)


@contextlib.contextmanager
def _span(otel: _Otel, job: Job, ok: tuple[type[BaseException], ...]) -> Iterator[None]:
    parent = None
    links = None
    if job.meta and "traceparent" in job.meta:
        parent = otel.propagator.extract(job.meta)
        remote = otel.trace.get_current_span(parent).get_span_context()
        if remote.is_valid:
            links = [otel.link(remote, {"jobrun.link": "enqueued"})]
        else:
            parent = None
    attributes: dict[str, str | int] = {
        "jobrun.job.id": str(job.id),
        "jobrun.job.type": job.type,
        "jobrun.job.queue": job.queue,
        "jobrun.job.attempt": job.attempts,
        "messaging.system": "jobrun",
        "messaging.destination.name": job.queue,
        "messaging.message.id": str(job.id),
    }
    with otel.tracer.start_as_current_span(
        SPAN_NAME,
        context=parent,
        kind=otel.consumer,
        links=links,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as exc:
            if isinstance(exc, Exception) and not isinstance(exc, ok):
                span.record_exception(exc)
                span.set_status(otel.error, f"{type(exc).__name__}: {exc}"[:256])
            raise
