"""Prometheus metrics and the health endpoints of a worker (the ``jobrun[metrics]`` extra).

Three parts, wired by :class:`~jobrun.client.Client` when ``metrics_port`` is
set (``jobrun worker --metrics-port PORT``):

* :class:`PrometheusObserver`, the :class:`~jobrun.telemetry.hooks.Observer` that
  counts what this process did: jobs enqueued, claimed, and how each attempt
  ended, with a histogram of queue wait (claim time minus ``run_at``: a job
  delayed on purpose has not waited while it was not due) and of handler run
  time, all labelled by queue and type. Counters are per process: sum them
  across workers.
* :class:`QueueStatsPublisher`, which sets the queue gauges (depth, due,
  leased, lag) from :meth:`~jobrun.ports.Admin.queue_stats` on a timer, in one
  process at a time: the holder of an advisory lock of its own
  (:data:`QUEUE_STATS_LOCK_KEY`), so a fleet of workers runs one cheap query
  per interval however often Prometheus scrapes, and only the leader exports
  the gauges (``jobrun_queue_stats_leader`` says which one does).
* :class:`MetricsServer`, a tiny HTTP server on the worker's event loop:
  ``/metrics`` (the Prometheus text format), ``/healthz`` (200 while the
  process runs and its event loop answers: the reply is written by the loop
  itself, so a blocked loop fails the probe by timing out) and ``/readyz``
  (200 when the database answers and every migration is applied, else 503
  with the reason).

This module imports ``prometheus_client`` at import time; import it only
when metrics are wanted (:func:`jobrun.telemetry.serving.load_metrics` says which extra
to install when it is missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from jobrun._waiting import sleep_unless
from jobrun.domain import Job, JobState, QueueStats
from jobrun.durations import positive_seconds
from jobrun.errors import ConfigurationError, JobrunError
from jobrun.leadership import QUEUE_STATS_LOCK_KEY, Elector
from jobrun.outages import process_outages
from jobrun.ports import Locker, LockHandle
from jobrun.telemetry.hooks import FINISHED_OUTCOMES, Observer

__all__ = [
    "QUEUE_STATS_LOCK_KEY",
    "MetricsServer",
    "PrometheusObserver",
    "QueueStatsPublisher",
    "QueueStatsSource",
    "Readiness",
]

_log = logging.getLogger("jobrun.metrics")

_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
_RUN_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
_LABELS = ("queue", "type")
_REAPED_STATES = {JobState.DEAD: "dead", JobState.CANCELLED: "cancelled"}


class _Children:
    """The labelled children of one (queue, type), looked up once instead of per job."""

    __slots__ = ("claimed", "enqueued", "outcomes", "reaped", "run", "wait")

    def __init__(self, metrics: PrometheusObserver, queue: str, job_type: str) -> None:
        self.enqueued = metrics.enqueued_total.labels(queue, job_type)
        self.claimed = metrics.claimed_total.labels(queue, job_type)
        self.reaped = metrics.reaped_total.labels(queue, job_type)
        self.wait = metrics.queue_wait.labels(queue, job_type)
        self.run = metrics.run_time.labels(queue, job_type)
        self.outcomes = {
            name: counter.labels(queue, job_type) for name, counter in metrics.outcomes.items()
        }


class PrometheusObserver(Observer):
    """Counts jobrun's events as Prometheus metrics in ``registry`` (a new one by default).

    A registry of its own keeps two clients in one process (tests, a service
    with two databases) from clashing; pass ``prometheus_client.REGISTRY`` to
    add jobrun's metrics to the ones a service already exposes.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        """The registry the metrics are in: what ``/metrics`` exposes."""
        r = self.registry
        self.enqueued_total = Counter(
            "jobrun_jobs_enqueued", "Jobs enqueued by this process.", _LABELS, registry=r
        )
        self.claimed_total = Counter(
            "jobrun_jobs_claimed", "Jobs claimed by this worker.", _LABELS, registry=r
        )
        self.reaped_total = Counter(
            "jobrun_jobs_reaped",
            "Expired leases failed by this process's reaper.",
            _LABELS,
            registry=r,
        )
        help_texts = {
            "succeeded": "Attempts that completed their job.",
            "failed": "Failed attempts whose job was queued again for a retry.",
            "dead": "Jobs that ended dead: a failed attempt, run or reaped, with none left.",
            "cancelled": "Jobs that ended cancelled while this worker ran or reaped them.",
            "snoozed": "Attempts that snoozed their job (the attempt is given back).",
            "handed_back": "Jobs handed back unfinished at shutdown (the attempt is given back).",
            "lease_lost": "Attempts whose outcome came too late: the lease was already lost.",
        }
        self.outcomes = {
            name: Counter(f"jobrun_jobs_{name}", help_texts[name], _LABELS, registry=r)
            for name in FINISHED_OUTCOMES
        }
        self.queue_wait = Histogram(
            "jobrun_job_queue_wait_seconds",
            "From a job's run_at to its claim (database clock), per attempt.",
            _LABELS,
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.run_time = Histogram(
            "jobrun_job_run_seconds",
            "How long a handler ran, per attempt.",
            _LABELS,
            buckets=_RUN_BUCKETS,
            registry=r,
        )
        self.queued = Gauge(
            "jobrun_queue_queued_jobs",
            "Jobs waiting in the queue, due or not.",
            ["queue"],
            registry=r,
        )
        self.due = Gauge(
            "jobrun_queue_due_jobs", "Waiting jobs whose run_at has come.", ["queue"], registry=r
        )
        self.leased = Gauge(
            "jobrun_queue_leased_jobs", "Jobs of the queue running now.", ["queue"], registry=r
        )
        self.lag = Gauge(
            "jobrun_queue_lag_seconds",
            "How long the oldest due job has waited since its run_at (0: none due).",
            ["queue"],
            registry=r,
        )
        self.stats_leader = Gauge(
            "jobrun_queue_stats_leader",
            "1 while this process publishes the jobrun_queue_* gauges (one process does).",
            registry=r,
        )
        self._children: dict[tuple[str, str], _Children] = {}
        self._queues: set[str] = set()

    def _of(self, job: Job) -> _Children:
        key = (job.queue, job.type)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = _Children(self, job.queue, job.type)
        return found

    def enqueued(self, jobs: Sequence[Job]) -> None:
        """Count ``jobs`` as enqueued."""
        if len(jobs) == 1:
            self._of(jobs[0]).enqueued.inc()
            return
        groups: dict[tuple[str, str], int] = {}
        for job in jobs:
            key = (job.queue, job.type)
            groups[key] = groups.get(key, 0) + 1
        for (queue, job_type), n in groups.items():
            found = self._children.get((queue, job_type))
            if found is None:
                found = self._children[(queue, job_type)] = _Children(self, queue, job_type)
            found.enqueued.inc(n)

    def claimed(self, jobs: Sequence[Job]) -> None:
        """Count the claims and observe each job's wait from run_at to its claim."""
        for job in jobs:
            children = self._of(job)
            children.claimed.inc()
            waited = (job.updated_at - job.run_at).total_seconds()
            children.wait.observe(waited if waited > 0 else 0.0)

    def finished(self, job: Job, outcome: str, run_seconds: float) -> None:
        """Count the attempt's outcome and observe its run time."""
        children = self._of(job)
        counter = children.outcomes.get(outcome)
        if counter is not None:
            counter.inc()
        children.run.observe(run_seconds)

    def reaped(self, jobs: Sequence[Job]) -> None:
        """Count reaped jobs, and those the reap left dead or cancelled."""
        for job in jobs:
            children = self._of(job)
            children.reaped.inc()
            final = _REAPED_STATES.get(job.state)
            if final is not None:
                children.outcomes[final].inc()

    def set_queue_stats(self, stats: Sequence[QueueStats]) -> None:
        """Set the queue gauges to ``stats``; queues no longer listed lose their series."""
        seen = set()
        for s in stats:
            seen.add(s.queue)
            self.queued.labels(s.queue).set(s.queued)
            self.due.labels(s.queue).set(s.due)
            self.leased.labels(s.queue).set(s.leased)
            self.lag.labels(s.queue).set(s.lag.total_seconds())
        for gone in self._queues - seen:
            self._remove_queue(gone)
        self._queues = seen

    def clear_queue_stats(self) -> None:
        """Drop every queue gauge series (this process no longer publishes them)."""
        for queue in self._queues:
            self._remove_queue(queue)
        self._queues = set()

    def _remove_queue(self, queue: str) -> None:
        for gauge in (self.queued, self.due, self.leased, self.lag):
            with contextlib.suppress(KeyError):
                gauge.remove(queue)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)


class QueueStatsSource(Protocol):
    """What the publisher needs from the store: the one read of :class:`~jobrun.ports.Admin`."""

    async def queue_stats(self) -> list[QueueStats]:
        """Per queue: jobs queued, due, leased, and the lag of the oldest due job."""
        ...


class QueueStatsPublisher:
    """Sets ``metrics``' queue gauges every ``every`` while it leads.

    Leadership is the advisory lock ``key`` taken through ``locker``; a
    follower tries again every ``retry_every``. When it stops leading
    (the lock's connection died, or ``run`` ends) it drops its gauge series,
    so no process exports stale depths. Store and locker errors are logged
    and retried, never raised.
    """

    def __init__(
        self,
        store: QueueStatsSource,
        locker: Locker,
        metrics: PrometheusObserver,
        *,
        every: timedelta = timedelta(seconds=10),
        retry_every: timedelta = timedelta(seconds=5),
        key: int = QUEUE_STATS_LOCK_KEY,
    ) -> None:
        self._every = positive_seconds("every", every)
        self._retry = positive_seconds("retry_every", retry_every)
        self._store = store
        self._metrics = metrics
        self._elector = Elector(locker, key, name="queue stats", retry_every=self._retry)
        self.updates = 0
        """How many times this publisher has set the gauges."""

    async def run(self, stop: asyncio.Event) -> None:
        """Compete for the lock and publish while leading, until ``stop`` is set."""
        await self._elector.run(stop, self._lead)

    async def _lead(self, handle: LockHandle, stop: asyncio.Event) -> None:
        self._metrics.stats_leader.set(1)
        try:
            while not stop.is_set() and not handle.lost:
                await self._publish()
                await sleep_unless(stop, self._every, handle)
        finally:
            self._metrics.stats_leader.set(0)
            self._metrics.clear_queue_stats()

    async def _publish(self) -> None:
        try:
            stats = await self._store.queue_stats()
        except (JobrunError, OSError) as exc:
            process_outages().log_failure(
                _log, exc, "queue stats: reading queue stats failed: %s", exc
            )
        else:
            self._metrics.set_queue_stats(stats)
            self.updates += 1


Readiness = Callable[[], Awaitable[None]]
"""An async check that returns when the process is ready and raises (with the reason) if not."""

_READ_TIMEOUT = 5.0
_READY_TIMEOUT = 5.0
_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class MetricsServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` over HTTP/1.1, served on the running loop.

    ``ready`` is awaited for each ``/readyz`` (bounded to 5 s): it returns
    when the process can do its work and raises when it cannot; the
    exception's message is the 503's body. Each response closes its
    connection. Bind to ``host`` (``127.0.0.1`` by default: expose it on
    purpose) and ``port`` (0: any free port, see :attr:`port`).
    """

    def __init__(
        self,
        metrics: PrometheusObserver,
        ready: Readiness,
        *,
        host: str = "127.0.0.1",
        port: int = 9464,
    ) -> None:
        self._metrics = metrics
        self._ready = ready
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The port actually bound (useful with ``port=0``)."""
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        """Bind and start serving; ConfigurationError when the address cannot be bound."""
        try:
            self._server = await asyncio.start_server(self._handle, self._host, self._port)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot serve metrics on {self._host}:{self._port}: {exc.strerror or exc}"
            ) from None
        _log.info("serving /metrics, /healthz and /readyz on http://%s:%d", self._host, self.port)

    async def close(self) -> None:
        """Stop listening and close open connections."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            path = target.split("?", 1)[0]
            status, ctype, body = await self._respond(method, path)
            header = (
                f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
                f"Content-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(header if method == "HEAD" else header + body)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(self, method: str, path: str) -> tuple[int, str, bytes]:
        text = "text/plain; charset=utf-8"
        if method not in ("GET", "HEAD"):
            return 405, text, b"method not allowed\n"
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self._metrics.exposition()
        if path == "/healthz":
            return 200, text, b"ok\n"
        if path == "/readyz":
            try:
                await asyncio.wait_for(self._ready(), _READY_TIMEOUT)
            except TimeoutError:
                return 503, text, b"not ready: the readiness check timed out\n"
            except Exception as exc:
                reason = " ".join(str(exc).split()) or type(exc).__name__
                return 503, text, f"not ready: {reason}\n".encode()
            return 200, text, b"ready\n"
        return 404, text, b"not found: try /metrics, /healthz or /readyz\n"
