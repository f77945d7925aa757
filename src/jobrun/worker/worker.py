"""The worker: claims jobs, runs their handlers, and reports every outcome.

One :class:`Worker` is one owner of leases. Its loops, all on one event loop:

* **claim**: leases as many due jobs as it has free slots, in one statement,
  and starts one task per job. A full batch means more are waiting, so it
  claims again as soon as slots free up; a short batch means the queues are
  drained, so it waits for a notification from the dispatcher (or simply
  ``poll_every``: notifications only cut latency, polling is the guarantee).
  While the queues stay busy it also claims a little ahead (see
  :data:`DEFAULT_CLAIM_AHEAD`): a small buffer of leased jobs that start the
  moment a slot frees, so that claims and completions stay large when every
  slot is taken by short jobs, whatever ``concurrency`` is.
* **jobs**: each handler runs as a task (``async def``) or in a bounded thread
  pool (``def``). Every attempt ends as an :class:`~jobrun.job.Outcome`: a
  completion (with the handler's commit callback, if any), or a failure (an
  exception, a timeout, an unknown type or a payload that does not validate,
  retried with the job's own backoff), a snooze, a cancel or a hand-back.
* **completer**: records outcomes in batches. Finished attempts queue up; the
  completer sends whatever is ready in one ``store.record_outcomes``, which
  records every outcome without a callback in one statement and the ones with
  a callback in one group-commit transaction. It never waits on a timer:
  an idle worker completes a lone job at once, a busy one builds big batches
  because jobs keep finishing while the previous batch commits.
* **heartbeat**: extends the leases of running jobs. A job left out of the
  kept set was cancelled or lost its lease; its handler is cancelled (task
  cancellation for async handlers, the :class:`~jobrun.registry.CancellationToken`
  for sync ones) and the attempt is reported as a failure, which the store
  turns into ``cancelled`` when a cancel was requested.
* **reaper**: :class:`~jobrun.reaper.Reaper`, safe on every worker.

Shutdown: the first SIGTERM/SIGINT (or the ``stop`` event) stops claiming and
lets running jobs finish until ``shutdown_grace``; whatever still runs then is
cancelled and handed back (a hand-back outcome): queued, due now, the
attempt not counted, so it neither sits leased until its lease expires nor
loses an attempt to a deploy. A second signal skips the grace period.

A job is handed back only once its handler has stopped. An async handler is
cancelled and stops; a sync handler runs in a thread that cannot be stopped,
so one that ignores its cancellation token past the deadline is *left*: its
job stays leased, the worker returns without waiting for the thread (the
threads are daemon threads, so the process can exit), and the lease runs out
so the reaper decides, counting the attempt. Handing such a job back would
let another worker start it while this thread still runs it. For the same
reason a sync handler that times out or is cancelled keeps its job leased and
heartbeated until its thread returns.

The clock rule: every time sent to the store is database time. Claimed rows
carry ``lease_expires_at`` (database now + lease), so the worker derives
database now from each claim batch plus the monotonic clock instead of a round
trip per failure.

The worker depends on the ports in :mod:`jobrun.ports` only, never on psycopg.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import logging
import os
import secrets
import signal
import socket
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobrun._collector import young_threshold_raised
from jobrun._threads import DaemonThreadPool
from jobrun.config import DEFAULT_CLAIM_AHEAD, DEFAULT_YOUNG_THRESHOLD
from jobrun.errors import (
    ConfigurationError,
    JobrunError,
    LeaseLost,
    UnknownJobType,
    UsageError,
)
from jobrun.job import CommitCallback, HandoffOffer, Job, JobState, Outcome, OutcomeKind
from jobrun.observe import Observer, current_job
from jobrun.ports import Dispatcher, Executor, HandoffInbox, HandoffReceiver, WorkerStore
from jobrun.reaper import Reaper
from jobrun.registry import Cancel, Handler, JobContext, Registry, Snooze
from jobrun.tracing import job_span

__all__ = ["DEFAULT_CLAIM_AHEAD", "Completer", "CompletionStats", "Worker", "default_owner"]

_log = logging.getLogger("jobrun.worker")
_handler_log = logging.getLogger("jobrun.handler")

# The jobs.last_error column holds at most 8192 characters; keep the end of a
# traceback, where the exception is, when it is longer.
_MAX_ERROR = 8000
# How long a shutdown waits for handed-back jobs to be reported before giving
# up on them (their leases then expire and the reaper requeues them).
_HAND_BACK_TIMEOUT = 10.0
# At the shutdown deadline, how long a sync handler gets to notice its
# cancellation token before its job is left leased for the reaper.
_TOKEN_NOTICE = 0.5

_LABELS = {
    OutcomeKind.FAIL: "failed",
    OutcomeKind.RELEASE: "handed_back",
    OutcomeKind.SNOOZE: "snoozed",
    OutcomeKind.CANCEL: "cancelled",
}

# What an attempt's outcome is called for the observer: by the state it left
# the job in, or for a job queued again by the kind of outcome that did it.
_OBSERVED = {
    JobState.SUCCEEDED: "succeeded",
    JobState.DEAD: "dead",
    JobState.CANCELLED: "cancelled",
}
_REQUEUED = {
    OutcomeKind.FAIL: "failed",
    OutcomeKind.RELEASE: "handed_back",
    OutcomeKind.SNOOZE: "snoozed",
}

_CLAIM_AHEAD_MAX = 10
# A buffered job waiting this many times claim_ahead (and at least the
# minimum) is handed back: see Worker._hand_back_stale.
_AHEAD_PATIENCE = 10
_AHEAD_PATIENCE_MIN = 0.5
# How often the start rate behind the buffer's size is measured.
_RATE_PERIOD = 0.05

_REASON_CANCELLED = "cancelled"
_REASON_SHUTDOWN = "shutdown"
_REASON_TIMEOUT = "timeout"


def default_owner() -> str:
    """``host:pid:random``: unique per worker, and says where a lease came from."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _one_line(exc: BaseException) -> str:
    """The reason ``exc`` gives, on one line; the type too unless it is one of jobrun's."""
    text = " ".join(str(exc).split())
    if isinstance(exc, JobrunError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc)).strip()
    if len(text) > _MAX_ERROR:
        text = "...\n" + text[-(_MAX_ERROR - 4) :]
    return text


@dataclass(slots=True)
class CompletionStats:
    """Running totals of a worker's completions; constant size however long it runs."""

    batches: int = 0
    """Completion batches sent to the store."""
    jobs: int = 0
    """Jobs sent in those batches (completed, lost or failed in their callback)."""
    largest_batch: int = 0
    """The largest batch sent so far."""
    callback_reinvocations: int = 0
    """Extra calls of commit callbacks: a group rolled back by another callback's
    failure runs the others again (their writes still commit once)."""


class Completer:
    """Records finished attempts' outcomes in batches through ``store.record_outcomes``.

    :meth:`submit` returns a future resolved with the completed :class:`Job`
    or the error for that job (an exception *value*, never raised into the
    future, so nobody has to retrieve it). At most ``max_inflight`` batches
    are committing at once; everything submitted meanwhile forms the next
    batch, up to ``max_batch`` jobs.
    """

    def __init__(
        self,
        store: Executor,
        owner: str,
        *,
        max_batch: int = 1000,
        max_inflight: int = 2,
    ) -> None:
        if max_batch < 1 or max_inflight < 1:
            raise ConfigurationError("completion batch size and parallelism must be positive")
        self._store = store
        self._owner = owner
        self._max_batch = max_batch
        self._max_inflight = max_inflight
        self._pending: list[tuple[Outcome, asyncio.Future[Job | BaseException]]] = []
        self._wake = asyncio.Event()
        self._closed = False
        self.stats = CompletionStats()
        """Totals of the batches sent so far."""

    def submit(self, outcome: Outcome) -> asyncio.Future[Job | BaseException]:
        """Queue ``outcome``; the future resolves once its batch was recorded."""
        fut: asyncio.Future[Job | BaseException] = asyncio.get_running_loop().create_future()
        self._pending.append((outcome, fut))
        self._wake.set()
        return fut

    def close(self) -> None:
        """Stop once everything submitted so far has been committed."""
        self._closed = True
        self._wake.set()

    async def run(self) -> None:
        """Send batches until closed and drained."""
        inflight: set[asyncio.Task[None]] = set()
        try:
            while True:
                if not self._pending:
                    if self._closed:
                        if inflight:
                            await asyncio.gather(*inflight)
                        return
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                if len(inflight) >= self._max_inflight:
                    await asyncio.wait(inflight, return_when=asyncio.FIRST_COMPLETED)
                    continue
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                task = asyncio.create_task(self._flush(batch))
                inflight.add(task)
                task.add_done_callback(inflight.discard)
        finally:
            for task in inflight:
                task.cancel()
            cancelled = asyncio.CancelledError("completer stopped")
            for _, fut in self._pending:
                if not fut.done():
                    fut.set_result(cancelled)

    async def _flush(
        self, batch: list[tuple[Outcome, asyncio.Future[Job | BaseException]]]
    ) -> None:
        stats = self.stats
        stats.batches += 1
        stats.jobs += len(batch)
        stats.largest_batch = max(stats.largest_batch, len(batch))
        results: Sequence[Job | BaseException]
        completions = [c for c, _ in batch]
        try:
            results = await self._store.record_outcomes(self._owner, completions)
            if len(results) != len(batch):
                raise RuntimeError(
                    f"record_outcomes returned {len(results)} results for {len(batch)} jobs"
                )
        except Exception as exc:
            results = [exc] * len(batch)
        except asyncio.CancelledError as exc:
            results = [exc] * len(batch)
            raise
        finally:
            for completion in completions:
                if completion.invocations > 1:
                    stats.callback_reinvocations += completion.invocations - 1
            for (_, fut), result in zip(batch, results, strict=False):
                if not fut.done():
                    fut.set_result(result)


@dataclass(slots=True, eq=False)
class _Running:
    """A claimed job while this worker holds it."""

    job: Job
    handler: Handler | None
    ctx: JobContext
    started: float
    task: asyncio.Task[None] | None = None
    # The sync handler's thread, while it runs or after; None for async handlers.
    thread: Future[Any] | None = None
    # Left leased at shutdown because its handler thread would not stop: never reported.
    left: bool = False
    # Why the worker itself stopped the job (cancelled, shutdown); None while it runs freely.
    stop_reason: str | None = None
    # True once the handler has finished and the outcome is being reported (a
    # completion or a fail): it can no longer be cancelled, only reported.
    reporting: bool = False
    # True once the task has begun _execute. A task cancelled before its first
    # step never runs the coroutine, so nothing would report the job or free
    # its slot: such a run is stopped through stop_reason alone.
    entered: bool = False
    # Seconds the handler ran (from start to the end of the handler), for metrics.
    ran: float = 0.0
    # The job's next attempt, claimed by this worker while this run still
    # reported its outcome (a snooze or retry without delay commits the job as
    # queued, and a claim can return it before this run has left the table).
    successor: Job | None = None


def _positive(name: str, value: timedelta | None) -> None:
    if value is not None and value <= timedelta(0):
        raise ConfigurationError(f"{name} must be positive, got {value}")


class Worker:
    """Runs the handlers of ``registry`` for jobs of ``queues``, ``concurrency`` at a time.

    ``store`` and ``dispatcher`` are ports (:class:`jobrun.ports.WorkerStore`,
    :class:`jobrun.ports.Dispatcher`); without a dispatcher the worker polls
    every ``poll_every``. ``lease`` is how long a claim holds a job without a
    heartbeat; ``heartbeat_every`` must sit well inside it (at most a third)
    so one slow heartbeat does not lose a lease. ``job_timeout`` limits each
    attempt unless the handler sets its own. ``reap_every=None`` turns the
    built-in reaper off. ``observer`` (:class:`jobrun.observe.Observer`) is
    told of every claim, every attempt's outcome and every reap (metrics);
    without one those calls are skipped. Settings are checked here, raising
    :class:`ConfigurationError` before anything runs.

    While a handler runs, :data:`jobrun.observe.current_job` holds its job
    (for :class:`jobrun.observe.JobLogFilter`), and with ``opentelemetry-api``
    installed the attempt runs in the span ``jobrun.job`` (:mod:`jobrun.tracing`).

    With ``handoff`` (the default) and a dispatcher that is also a
    :class:`~jobrun.ports.HandoffReceiver`, every claim that leaves slots free
    offers them (:class:`~jobrun.job.HandoffOffer`): a single enqueue due now
    then leases its job to this worker in its own statement and the
    dispatcher delivers it, so the handler starts without a claim. A handed
    job finds no free slot only when offers crossed (several queues, a claim
    in flight) or the worker is stopping; it is then handed back at once,
    due now and its attempt not counted. A stopping worker withdraws its
    offers first. Drain mode never offers.

    ``claim_ahead`` is how much work, in time at the rate jobs have been
    starting, a busy worker leases ahead of its free slots (see
    :data:`DEFAULT_CLAIM_AHEAD`); ``timedelta(0)`` claims only for free slots.

    While it runs, the worker raises CPython's young-generation collection
    threshold to ``gc_young_threshold`` (see :mod:`jobrun._collector`): with
    the interpreter's default the cyclic collector took a sixth of a busy
    worker's time. ``None`` leaves the collector alone.
    """

    def __init__(
        self,
        store: WorkerStore,
        registry: Registry,
        *,
        queues: Sequence[str] = ("default",),
        concurrency: int = 10,
        dispatcher: Dispatcher | None = None,
        lease: timedelta = timedelta(seconds=30),
        heartbeat_every: timedelta = timedelta(seconds=10),
        poll_every: timedelta = timedelta(seconds=1),
        job_timeout: timedelta | None = None,
        shutdown_grace: timedelta = timedelta(seconds=30),
        owner: str | None = None,
        reap_every: timedelta | None = timedelta(seconds=5),
        completion_batch: int = 1000,
        logger: logging.Logger | None = None,
        observer: Observer | None = None,
        handoff: bool = True,
        gc_young_threshold: int | None = DEFAULT_YOUNG_THRESHOLD,
        claim_ahead: timedelta = DEFAULT_CLAIM_AHEAD,
    ) -> None:
        if isinstance(queues, str):
            queues = (queues,)
        if not queues or any(not q for q in queues):
            raise ConfigurationError("a worker needs at least one non-empty queue name")
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {concurrency}")
        _positive("lease", lease)
        _positive("heartbeat_every", heartbeat_every)
        _positive("poll_every", poll_every)
        _positive("job_timeout", job_timeout)
        _positive("reap_every", reap_every)
        if shutdown_grace < timedelta(0):
            raise ConfigurationError(f"shutdown_grace must not be negative, got {shutdown_grace}")
        if claim_ahead < timedelta(0):
            raise ConfigurationError(f"claim_ahead must not be negative, got {claim_ahead}")
        if heartbeat_every > lease / 3:
            raise ConfigurationError(
                f"heartbeat_every ({heartbeat_every}) must be at most a third of the lease "
                f"({lease}), so a late heartbeat still lands before the lease expires"
            )
        if owner is not None and not owner:
            raise ConfigurationError("owner must not be empty")
        if gc_young_threshold is not None and gc_young_threshold < 1:
            raise ConfigurationError(
                f"gc_young_threshold must be positive (or None), got {gc_young_threshold}"
            )
        self._gc_young_threshold = gc_young_threshold
        self._store = store
        self._registry = registry
        self._queues = list(dict.fromkeys(queues))
        self._concurrency = concurrency
        self.dispatcher = dispatcher
        """Wakes the idle worker on notifications; None: it only polls."""
        self._lease = lease
        self._heartbeat_every = heartbeat_every.total_seconds()
        self._poll = poll_every
        self._poll_every = poll_every.total_seconds()
        self._job_timeout = job_timeout
        self._grace = shutdown_grace.total_seconds()
        self._observer = observer
        self._reaper = (
            Reaper(store, reap_every, logger=logger, observer=observer) if reap_every else None
        )
        self._log = logger or _log
        self.owner = owner or default_owner()
        """The lease owner this worker claims as."""
        self._completer = Completer(store, self.owner, max_batch=completion_batch)
        # Keyed by the job id as an int: a UUID hashes in Python, an int in C.
        self._running: dict[int, _Running] = {}
        self._executing = 0
        # Claimed ahead (see DEFAULT_CLAIM_AHEAD), oldest first: leased, not started.
        self._ahead: collections.deque[tuple[Job, float]] = collections.deque()
        self._starts = 0
        self._start_rate = 0.0
        self._rate_since = (time.monotonic(), 0)
        self._last_claim_full = False
        self._claim_ahead = claim_ahead.total_seconds()
        self._ahead_patience = max(_AHEAD_PATIENCE_MIN, _AHEAD_PATIENCE * self._claim_ahead)
        self._handing_back = False
        self._threads: DaemonThreadPool | None = None
        self._started = False
        self._drain_mode = False
        # Jobs that have left _running, counted: a drain compares it across a
        # claim to tell whether an outcome committed while the claim ran.
        self._settled = 0
        # Created in run(): asyncio primitives belong to the loop that runs the worker.
        self._stopping: asyncio.Event | None = None
        self._hard: asyncio.Event | None = None
        self._wakeup: asyncio.Event | None = None
        self._signals: list[int] = []
        # Handoff (see HandoffOffer): where handed jobs arrive, while offering.
        self._inbox: HandoffInbox | None = None
        self._handoff = handoff
        # Longer than an idle worker takes between two claims, each of which
        # renews the offers; an offer of a worker that died lasts this long.
        self._offer_ttl = 2 * poll_every + timedelta(seconds=1)
        self._claiming = False
        # Jobs handed in while a claim was in flight: started once it returns.
        self._handed_during_claim: list[Job] = []

    # -- public surface ---------------------------------------------------------------------

    @property
    def running(self) -> int:
        """How many jobs this worker holds right now (running, reporting or claimed ahead)."""
        return len(self._running) + len(self._ahead)

    @property
    def stats(self) -> CompletionStats:
        """Running totals of this worker's completions (batches, re-invoked callbacks)."""
        return self._completer.stats

    def request_stop(self, *, graceful: bool = True) -> None:
        """Stop claiming; with ``graceful=False`` also skip the grace period for running jobs."""
        if self._stopping is None or self._hard is None or self._wakeup is None:
            raise UsageError("the worker is not running")
        self._stopping.set()
        self._wakeup.set()
        if not graceful:
            self._hard.set()

    def install_signal_handlers(self) -> None:
        """Stop on SIGTERM and SIGINT: gracefully on the first, at once on the second.

        Call it from inside the event loop that runs :meth:`run` (e.g. in the
        same ``async def main``, before awaiting ``run``); the handlers are
        removed when ``run`` returns.
        """
        loop = asyncio.get_running_loop()
        self._ensure_events()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
            self._signals.append(sig)

    async def run(self, stop: asyncio.Event | None = None, *, drain: bool = False) -> None:
        """Work until ``stop`` is set or a stop is requested, then shut down gracefully.

        With ``drain`` it also stops by itself once a claim finds no due job
        and nothing runs here. A worker runs once. Cancelling the task that
        runs it behaves like a second signal: running jobs are handed back at
        once.
        """
        if self._started:
            raise UsageError("a Worker runs once; create a new one")
        self._started = True
        with young_threshold_raised(self._gc_young_threshold):
            await self._run(stop, drain)

    async def _run(self, stop: asyncio.Event | None, drain: bool) -> None:
        self._drain_mode = drain
        self._ensure_events()
        assert self._stopping is not None and self._hard is not None
        background: list[asyncio.Task[Any]] = [
            asyncio.create_task(self._completer.run(), name="jobrun-completer"),
            asyncio.create_task(self._heartbeat_loop(), name="jobrun-heartbeat"),
        ]
        completer = background[0]
        if self._reaper is not None:
            background.append(asyncio.create_task(self._reaper.run(), name="jobrun-reaper"))
        if stop is not None:
            background.append(asyncio.create_task(self._watch(stop), name="jobrun-stop"))
        self._log.info(
            "worker %s started on queues %s, concurrency %d",
            self.owner,
            ",".join(self._queues),
            self._concurrency,
            extra={"owner": self.owner},
        )
        if self._handoff and not drain and isinstance(self.dispatcher, HandoffReceiver):
            self._inbox = self.dispatcher.receive_handoffs(self.owner, self._handed)
        try:
            await self._claim_loop()
            await self._retract_offers()
            await self._drain()
        except asyncio.CancelledError:
            self._hard.set()
            await self._drain()
            raise
        finally:
            if self._inbox is not None:
                self._inbox.close()
                self._inbox = None
            self._completer.close()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(completer), _HAND_BACK_TIMEOUT)
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            if self._threads is not None:
                # Threads of sync handlers cannot be interrupted; don't wait for them.
                self._threads.shutdown()
            loop = asyncio.get_running_loop()
            for sig in self._signals:
                loop.remove_signal_handler(sig)
            self._signals.clear()
            stats = self._completer.stats
            self._log.info(
                "worker %s stopped: %d jobs completed in %d batches, "
                "%d commit callbacks run again after a group rollback",
                self.owner,
                stats.jobs,
                stats.batches,
                stats.callback_reinvocations,
                extra={
                    "owner": self.owner,
                    "completed": stats.jobs,
                    "completion_batches": stats.batches,
                    "callback_reinvocations": stats.callback_reinvocations,
                },
            )

    # -- loops --------------------------------------------------------------------------------

    def _ensure_events(self) -> None:
        if self._stopping is None:
            self._stopping = asyncio.Event()
            self._hard = asyncio.Event()
            self._wakeup = asyncio.Event()

    def _on_signal(self, sig: int) -> None:
        assert self._stopping is not None
        graceful = not self._stopping.is_set()
        self._log.warning(
            "received %s: %s",
            signal.Signals(sig).name,
            "finishing running jobs" if graceful else "handing running jobs back now",
        )
        self.request_stop(graceful=graceful)

    async def _watch(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.request_stop()

    async def _claim_loop(self) -> None:
        assert self._stopping is not None and self._wakeup is not None
        claims_failing = False
        while not self._stopping.is_set():
            # Handler slots bound the work; reporting jobs still hold leases, so
            # they get a second allowance of the same size and no more.
            slots = max(
                0,
                min(
                    self._concurrency - self._executing,
                    2 * self._concurrency - len(self._running),
                ),
            )
            wanted = self._ahead_wanted()
            ahead = wanted - len(self._ahead)
            # The buffer never lifts the bound on leases held while outcomes
            # are reported: at most the buffer on top of that allowance.
            held = len(self._running) + len(self._ahead)
            free = min(
                max(0, slots - len(self._ahead)) + max(0, ahead),
                2 * self._concurrency + wanted - held,
            )
            # With every slot taken, claim ahead only once half the buffer has
            # gone, so that those claims stay large.
            if free <= 0 or (slots <= len(self._ahead) and 2 * ahead < wanted):
                # Every finishing job sets the wakeup, and so does a stop request;
                # with jobs buffered, so does their patience running out.
                self._wakeup.clear()
                if not self._ahead:
                    await self._wakeup.wait()
                    continue
                timer = asyncio.get_running_loop().call_later(
                    self._ahead_patience, self._wakeup.set
                )
                try:
                    await self._wakeup.wait()
                finally:
                    timer.cancel()
                self._hand_back_stale()
                continue
            settled_before = self._settled
            # Handoffs are offered for idle slots only, never for the buffer.
            offer = self._offer() if ahead <= 0 else None
            self._claiming = True
            try:
                jobs = await self._store.claim(
                    self._queues, self.owner, free, self._lease, offer=offer
                )
            except Exception as exc:
                self._claim_done()
                # One line per attempt: a database restart must not flood the log
                # with tracebacks (debug logging adds them back).
                self._log.warning(
                    "claim failed, retrying in %.1fs: %s",
                    self._poll_every,
                    _one_line(exc),
                    exc_info=self._log.isEnabledFor(logging.DEBUG),
                )
                claims_failing = True
                await self._idle(use_dispatcher=False)
                continue
            if claims_failing:
                claims_failing = False
                self._log.info("claims working again")
            if jobs and self._observer is not None:
                self._observer.claimed(jobs)
            self._last_claim_full = len(jobs) >= free
            # In claim order, after those claimed before; a stop requested
            # while the claim ran leaves them buffered, to be handed back.
            claimed_at = time.monotonic()
            self._ahead.extend((job, claimed_at) for job in jobs)
            self._start_ahead()
            self._claim_done()
            if len(jobs) < free:
                if self._drain_mode:
                    if self._settled != settled_before:
                        # An outcome (a snooze, a retry due now) committed
                        # while this claim ran, maybe after its snapshot:
                        # claim once more before calling the queues drained.
                        continue
                    if not self._running and not self._ahead:
                        self._log.info("worker %s: nothing due and nothing running", self.owner)
                        self.request_stop()
                        return
                    # Something still runs: claim again once it ends, since
                    # its outcome (a hand-back, a snooze) may make work due.
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                await self._idle(use_dispatcher=True)

    # -- handoff ------------------------------------------------------------------------------

    def _ahead_wanted(self) -> int:
        """How many jobs to hold claimed ahead now: ``claim_ahead``'s worth of starts."""
        if not self._last_claim_full or not self._claim_ahead:
            return 0
        now = time.monotonic()
        since, starts = self._rate_since
        if now - since >= _RATE_PERIOD:
            self._start_rate = (self._starts - starts) / (now - since)
            self._rate_since = (now, self._starts)
        return min(int(self._start_rate * self._claim_ahead), _CLAIM_AHEAD_MAX * self._concurrency)

    def _start_ahead(self) -> None:
        """Start buffered jobs while slots are free (none once the worker is stopping)."""
        assert self._stopping is not None
        while self._ahead and self._executing < self._concurrency:
            if self._stopping.is_set():
                return
            self._start(self._ahead.popleft()[0])

    def _hand_back_ahead(self, reason: str, *, claimed_by: float | None = None) -> None:
        """Give buffered jobs back (queued, due now, attempt not counted), oldest first.

        All of them, or with ``claimed_by`` (a monotonic time) those claimed by then.
        """
        while self._ahead and (claimed_by is None or self._ahead[0][1] <= claimed_by):
            job, _ = self._ahead.popleft()
            self._completer.submit(Outcome(job=job, kind=OutcomeKind.RELEASE, detail=reason))

    def _hand_back_stale(self) -> None:
        """Give back buffered jobs that waited far longer than the buffer was sized for.

        The buffer holds what the worker was starting in ``claim_ahead``; jobs
        still waiting many times that long mean its running jobs got slower
        (a slow dependency, a burst of long jobs), and other workers may have
        free slots. They go back, due now and their attempt not counted.
        """
        limit = time.monotonic() - self._ahead_patience
        if not self._ahead or self._ahead[0][1] > limit:
            return
        # Claim for free slots only until a claim comes back full again.
        self._last_claim_full = False
        reason = (
            f"handed back: it waited more than {self._ahead_patience:g}s "
            "for a slot of the worker that claimed it ahead"
        )
        self._hand_back_ahead(reason, claimed_by=limit)

    def _offer(self) -> HandoffOffer | None:
        """What to offer with the next claim: nothing unless handed jobs can arrive now."""
        inbox = self._inbox
        if inbox is None or not inbox.ready:
            return None
        assert self._stopping is not None
        if self._stopping.is_set():
            return None
        return HandoffOffer(channel=inbox.channel, ttl=self._offer_ttl)

    def _handed(self, job: Job) -> None:
        """A job an enqueue leased to this worker: start it, or give it back.

        Called by the dispatcher as the notification arrives, on this loop.
        """
        if job.id.int in self._running or any(j.id == job.id for j, _ in self._ahead):
            return
        if self._claiming:
            # The claim in flight was sized before this job was handed over.
            self._handed_during_claim.append(job)
            return
        self._take_handed(job)

    def _claim_done(self) -> None:
        self._claiming = False
        handed, self._handed_during_claim = self._handed_during_claim, []
        for job in handed:
            if job.id.int not in self._running:
                self._take_handed(job)

    def _take_handed(self, job: Job) -> None:
        assert self._stopping is not None
        room = min(
            self._concurrency - self._executing,
            2 * self._concurrency - len(self._running),
        )
        if room > 0 and not self._stopping.is_set():
            if self._observer is not None:
                self._observer.claimed((job,))
            self._start(job)
            return
        # No slot free (a multi-queue worker's offers overlap, or a claim's
        # rewrite crossed this handoff), or stopping: give it back at once,
        # due now and its attempt not counted, for another worker to claim.
        reason = "handed back: the worker had no free slot for a handed job"
        if self._stopping.is_set():
            reason = "handed back: the worker was stopping when the job was handed to it"
        self._completer.submit(Outcome(job=job, kind=OutcomeKind.RELEASE, detail=reason))

    async def _retract_offers(self) -> None:
        """A stopping worker takes no more handoffs (those already sent are given back)."""
        if self._inbox is None:
            return
        try:
            await self._store.retract_offers(self.owner)
        except Exception as exc:
            # They expire by themselves; jobs handed meanwhile are given back.
            self._log.warning("could not withdraw handoff offers: %s", _one_line(exc))

    async def _idle(self, *, use_dispatcher: bool) -> None:
        """Wait for a notification, ``poll_every``, or a stop request, whichever comes first."""
        assert self._stopping is not None
        if self._stopping.is_set():
            return
        stopper = asyncio.ensure_future(self._stopping.wait())
        if use_dispatcher and self.dispatcher is not None:
            waiter: asyncio.Future[Any] = asyncio.ensure_future(
                self.dispatcher.wait(self._queues, self._poll)
            )
        else:
            waiter = asyncio.ensure_future(asyncio.sleep(self._poll_every))
        try:
            await asyncio.wait({stopper, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
            waiter.cancel()
            failure = waiter.exception() if waiter.done() and not waiter.cancelled() else None
            if failure is not None:
                self._log.warning(
                    "dispatcher wait failed, polling instead: %s",
                    _one_line(failure),
                    exc_info=failure if self._log.isEnabledFor(logging.DEBUG) else None,
                )
                await asyncio.sleep(min(self._poll_every, 1.0))

    async def _heartbeat_loop(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(self._heartbeat_every)
            runs = [run for run in self._running.values() if not run.left]
            held = [run.job for run in runs]
            held += [run.successor for run in self._running.values() if run.successor]
            buffered = [job for job, _ in self._ahead]
            held += buffered
            if not held:
                continue
            try:
                kept = await self._store.heartbeat(self.owner, held, self._lease)
            except Exception as exc:
                self._log.warning(
                    "heartbeat failed, leases not extended this round: %s",
                    _one_line(exc),
                    exc_info=self._log.isEnabledFor(logging.DEBUG),
                )
                failing = True
                continue
            if failing:
                failing = False
                self._log.info("heartbeats working again")
            # What the heartbeat sent and was not kept is matched by identity,
            # not by id: a job whose attempt ended meanwhile (a snooze, a retry
            # due now) can be claimed again and held anew under the same id,
            # and that later claim was not what the heartbeat asked about.
            # Buffered when sent and not kept: cancelled (or the lease lost)
            # before it started. Reported as stopped, which ends it cancelled
            # or tells of the lost lease.
            sent = {id(job) for job in buffered}
            gone = [job for job, _ in self._ahead if id(job) in sent and job.id not in kept]
            if gone:
                dropped = {id(job) for job in gone}
                self._ahead = collections.deque(e for e in self._ahead if id(e[0]) not in dropped)
            for job in gone:
                self._completer.submit(
                    Outcome(
                        job=job,
                        kind=OutcomeKind.FAIL,
                        detail="stopped: the job was cancelled or its lease was lost",
                    )
                )
            for run in runs:
                if run.job.id in kept or self._running.get(run.job.id.int) is not run:
                    continue
                if not run.reporting and run.stop_reason is None:
                    self._log.info(
                        "job %s was cancelled or lost its lease; stopping it",
                        run.job.id,
                        extra=self._extra(run, outcome="stopping"),
                    )
                    self._stop(run, _REASON_CANCELLED)

    async def _drain(self) -> None:
        """Let running jobs finish until the grace deadline, then hand the rest back."""
        assert self._hard is not None
        self._hand_back_ahead("handed back: the worker shut down before the job started")
        deadline = time.monotonic() + self._grace
        hard = asyncio.ensure_future(self._hard.wait())
        try:
            while self._running and not self._hard.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                tasks = {r.task for r in self._running.values() if r.task is not None}
                await asyncio.wait(
                    tasks | {hard}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
        finally:
            hard.cancel()
        if not self._running:
            return
        self._log.warning(
            "handing back %d unfinished jobs", len(self._running), extra={"owner": self.owner}
        )
        self._handing_back = True
        for run in list(self._running.values()):
            self._stop(run, _REASON_SHUTDOWN)
        # Sync handlers get a moment to notice their token; a thread that still
        # runs after it cannot be stopped, so its job must not be handed back.
        threads = {
            r.task for r in self._running.values() if r.task is not None and r.thread is not None
        }
        if threads:
            await asyncio.wait(threads, timeout=_TOKEN_NOTICE)
        left = [r for r in self._running.values() if self._thread_running(r)]
        for run in left:
            run.left = True
        if left:
            self._log.warning(
                "leaving %d jobs leased whose handler threads are still running: %s; "
                "their leases expire within %s and the reaper then retries them",
                len(left),
                ", ".join(str(r.job.id) for r in left),
                self._lease,
                extra={"owner": self.owner, "job_ids": [str(r.job.id) for r in left]},
            )
        # A run that ends may start its successor, handed back at once: wait for those too.
        give_up = time.monotonic() + _HAND_BACK_TIMEOUT
        while True:
            tasks = {r.task for r in self._running.values() if r.task is not None and not r.left}
            remaining = give_up - time.monotonic()
            if not tasks or remaining <= 0:
                break
            await asyncio.wait(tasks, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if tasks:
            for task in tasks:
                task.cancel()
            self._log.error(
                "%d jobs could not be handed back in time; their leases will expire",
                len(tasks),
            )
        for run in left:
            # Stop waiting for the thread; _execute sees ``left`` and reports nothing.
            if run.task is not None:
                run.task.cancel()

    @staticmethod
    def _thread_running(run: _Running) -> bool:
        return run.thread is not None and not run.thread.done() and not run.reporting

    # -- one job ------------------------------------------------------------------------------

    def _start(self, job: Job, *, handed_back: bool = False) -> None:
        earlier = self._running.get(job.id.int)
        if earlier is not None:
            if earlier.reporting and earlier.successor is None:
                # The earlier run's outcome made the job due again and this
                # claim saw it before the run had been cleared away: the new
                # attempt starts as soon as it has.
                earlier.successor = job
                return
            # Claimed again while a stale attempt still runs here (its lease was
            # reaped): running both would run the job twice in this process. The
            # new lease is left to expire, and the reaper hands the job out again.
            self._log.warning(
                "job %s claimed again while its attempt %d still runs here; not starting it",
                job.id,
                earlier.job.attempts,
                extra={"job_id": str(job.id), "owner": self.owner},
            )
            return
        handler = self._registry.get(job.type)
        ctx = JobContext(job)
        run = _Running(job=job, handler=handler, ctx=ctx, started=time.monotonic())
        if handed_back:
            # Shutdown is handing jobs back: this one is returned without running.
            run.stop_reason = _REASON_SHUTDOWN
        self._running[job.id.int] = run
        self._executing += 1
        self._starts += 1
        run.task = asyncio.get_running_loop().create_task(self._execute(run))

    def _stop(self, run: _Running, reason: str) -> None:
        if run.reporting:
            return
        sync = run.handler is not None and not run.handler.is_async
        if run.stop_reason is not None:
            if reason == _REASON_SHUTDOWN and run.task is not None and not sync and run.entered:
                # Already stopping (an async handler that swallowed a cancel): insist.
                run.task.cancel()
            return
        run.stop_reason = reason
        run.ctx.token.set(reason)
        if run.task is None or not run.entered:
            # Not begun: _execute sees stop_reason, skips the handler and reports.
            return
        # A sync handler's thread cannot be interrupted: whatever the reason, the
        # job keeps its lease (and slot) until the handler notices the token and
        # returns; a shutdown that cannot wait leaves the job to its lease.
        if not sync:
            run.task.cancel()

    async def _execute(self, run: _Running) -> None:
        run.entered = True
        job = run.job
        commit: CommitCallback | None = None
        error: str | None = None
        ended: Outcome | None = None
        # This task's own context: handler logs (and a sync handler's thread) see the job.
        current_job.set(job)
        try:
            try:
                if run.stop_reason is None:
                    with job_span(job, ok=(Cancel, Snooze, asyncio.CancelledError)):
                        commit = await self._invoke(run)
            except asyncio.CancelledError:
                if run.left:
                    # Left leased at shutdown: reporting anything would free the
                    # job while its thread may still run it.
                    return
                if run.stop_reason is None:
                    raise
                # Ours: report the stop instead of dying with the task.
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
            except Cancel as exc:
                ended = Outcome(job=job, kind=OutcomeKind.CANCEL, detail=exc.reason)
            except Snooze as exc:
                ended = Outcome(job=job, kind=OutcomeKind.SNOOZE, delay=exc.delay)
            except JobrunError as exc:
                error = str(exc)
            except Exception as exc:
                error = _error_text(exc)
            self._release(run)
            if run.stop_reason is not None:
                # Also when the handler swallowed the cancellation or ignored the
                # token: the job was stopped all the same, so its result is discarded.
                await self._stopped(run)
            elif ended is not None:
                await self._report(run, ended)
            elif error is not None:
                await self._failed(run, error)
            elif commit is not None and not callable(commit):
                await self._failed(
                    run,
                    f"handler for {job.type!r} returned {type(commit).__name__}, "
                    "expected a commit callback or None",
                )
            else:
                await self._complete(run, commit)
        finally:
            self._release(run)
            self._running.pop(job.id.int, None)
            self._settled += 1
            if run.successor is not None:
                self._start(run.successor, handed_back=self._handing_back)
            assert self._wakeup is not None
            self._wakeup.set()

    def _release(self, run: _Running) -> None:
        """Free the job's handler slot: from here on it only reports its outcome.

        Reporting (a completion batch, a fail) is database work that overlaps the
        next claim, which is what keeps claims and completions pipelined.
        """
        if run.reporting:
            return
        run.reporting = True
        run.ran = time.monotonic() - run.started
        self._executing -= 1
        if self._ahead:
            self._start_ahead()
        assert self._wakeup is not None
        self._wakeup.set()

    async def _invoke(self, run: _Running) -> CommitCallback | None:
        handler = run.handler
        if handler is None:
            raise UnknownJobType(run.job.type)
        payload = handler.parse_payload(run.job)
        timeout = handler.timeout or self._job_timeout
        if handler.is_async:
            call: Any = handler.func(run.ctx, payload)
        else:
            if self._threads is None:
                self._threads = DaemonThreadPool(self._concurrency)
            # In a copy of this task's context: the job's log context and span go along.
            run.thread = self._threads.submit(
                contextvars.copy_context().run, handler.func, run.ctx, payload
            )
            call = asyncio.wrap_future(run.thread)
        if timeout is None:
            result: CommitCallback | None = await call
            return result
        # A timer rather than asyncio.timeout: expiry goes through _stop, which
        # sets the token *before* cancelling, so the handler sees both at once.
        timer = asyncio.get_running_loop().call_later(
            timeout.total_seconds(), self._stop, run, _REASON_TIMEOUT
        )
        try:
            result = await call
            return result
        finally:
            timer.cancel()

    async def _complete(self, run: _Running, commit: CommitCallback | None) -> None:
        keys = run.ctx.lock_keys if commit is not None else ()
        await self._report(run, Outcome(job=run.job, commit=commit, lock_keys=keys))

    async def _failed(self, run: _Running, error: str) -> None:
        await self._report(run, Outcome(job=run.job, kind=OutcomeKind.FAIL, detail=error))

    async def _stopped(self, run: _Running) -> None:
        if run.stop_reason == _REASON_TIMEOUT:
            timeout = (run.handler.timeout if run.handler else None) or self._job_timeout
            seconds = timeout.total_seconds() if timeout else 0.0
            await self._failed(run, f"timed out: the attempt exceeded {seconds:g}s")
        elif run.stop_reason == _REASON_SHUTDOWN:
            reason = "handed back: the worker shut down before the job finished"
            await self._report(run, Outcome(job=run.job, kind=OutcomeKind.RELEASE, detail=reason))
        else:
            # A requested cancel ends it cancelled; a lost lease makes it LeaseLost.
            await self._failed(run, "stopped: the job was cancelled or its lease was lost")

    async def _report(self, run: _Running, outcome: Outcome) -> None:
        """Hand ``outcome`` to the completer and log how the attempt ended."""
        result = await self._completer.submit(outcome)
        if self._observer is not None:
            self._observe(run, outcome, result)
        if isinstance(result, Job):
            state = result.state.value
            # A success is the common case: one INFO line per job cost a
            # busy worker about a quarter of its throughput, so it is DEBUG;
            # every other ending (retry, snooze, cancel, dead) stays visible.
            if state == "dead":
                level = logging.WARNING
            elif state == "succeeded":
                level = logging.DEBUG
            else:
                level = logging.INFO
            label = (
                state
                if outcome.kind is OutcomeKind.COMPLETE
                else f"{_LABELS[outcome.kind]}:{state}"
            )
            self._record(run, label, level=level, detail=outcome.detail)
        elif isinstance(result, LeaseLost):
            self._record(run, "lease_lost", level=logging.WARNING, detail=str(result))
        elif isinstance(result, asyncio.CancelledError):
            self._record(run, "abandoned", level=logging.ERROR, detail="worker stopped")
        elif outcome.kind is OutcomeKind.COMPLETE:
            # The effect did not commit (a failing commit callback, a database
            # error): it is a failed attempt like any other, so it retries.
            await self._failed(run, f"completion failed: {_error_text(result)}")
        else:
            self._log.warning(
                "could not record the %s of job %s, its lease will expire: %s",
                outcome.kind.value,
                run.job.id,
                _one_line(result),
                exc_info=result if self._log.isEnabledFor(logging.DEBUG) else None,
                extra=self._extra(run, outcome="report_failed"),
            )

    def _observe(self, run: _Running, outcome: Outcome, result: Job | BaseException) -> None:
        """Tell the observer how the attempt ended (nothing for an attempt not recorded)."""
        assert self._observer is not None
        if isinstance(result, Job):
            label = _OBSERVED.get(result.state)
            if label is None:  # queued again
                label = _REQUEUED.get(outcome.kind, "failed")
        elif isinstance(result, LeaseLost):
            label = "lease_lost"
        else:
            return
        self._observer.finished(run.job, label, run.ran)

    # -- logs ---------------------------------------------------------------------------------

    def _extra(self, run: _Running, *, outcome: str) -> dict[str, Any]:
        return {
            "job_id": str(run.job.id),
            "job_type": run.job.type,
            "queue": run.job.queue,
            "attempt": run.job.attempts,
            "owner": self.owner,
            "duration_ms": round((time.monotonic() - run.started) * 1000, 3),
            "outcome": outcome,
        }

    def _record(self, run: _Running, outcome: str, *, level: int, detail: str = "") -> None:
        if not self._log.isEnabledFor(level):
            return
        extra = self._extra(run, outcome=outcome)
        if detail:
            extra["error"] = detail
        self._log.log(
            level,
            "job %s (%s, attempt %d): %s in %.1fms",
            run.job.id,
            run.job.type,
            run.job.attempts,
            outcome,
            extra["duration_ms"],
            extra=extra,
        )
