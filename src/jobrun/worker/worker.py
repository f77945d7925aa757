"""The worker: claims jobs, runs their handlers, and reports every outcome.

One :class:`Worker` is one owner of leases. It composes services, each in a
room of its own and all on one event loop:

* **claimer** (:mod:`jobrun.worker.claimer`): leases as many due jobs as
  there are free slots (:mod:`jobrun.worker.claiming`), in one statement,
  plus a small buffer claimed ahead while the queues stay busy; waits for a
  notification or ``poll_every`` when they are drained.
* **executor** (:mod:`jobrun.worker.executor`): runs each job's handler, as
  a task (``async def``) or in a bounded thread pool (``def``), and turns the
  attempt into one :class:`~jobrun.domain.Outcome`: a completion (with the
  handler's commit callback, if any), or a failure (an exception or a
  timeout, retried on the job's own backoff; an unknown type or a payload
  that does not validate, on the bounded policy of :mod:`jobrun.unrunnable`),
  a snooze, a cancel or a hand-back.
* **reporter** and **completer** (:mod:`jobrun.worker.reporter`,
  :mod:`jobrun.worker.completer`): outcomes recorded in batches through
  ``store.record_outcomes``, then logged and counted.
* **heartbeat** (:mod:`jobrun.worker.heartbeat`): extends the leases of the
  jobs held; stops those cancelled or whose lease was lost.
* **handoff** (:mod:`jobrun.worker.handoff`): jobs an enqueue leases straight
  to this worker's free slots.
* **presence** (:mod:`jobrun.worker.presence`): this worker's row among the
  live workers, with the jobs it runs, written every heartbeat interval.
* **reaper**: :class:`~jobrun.reaper.Reaper`, safe on every worker.

Shutdown (:mod:`jobrun.worker.shutdown`): the first SIGTERM/SIGINT (or the
``stop`` event) stops claiming and lets running jobs finish until
``shutdown_grace``; whatever still runs then is cancelled and handed back
(queued, due now, the attempt not counted). A second signal skips the grace
period. A sync handler's thread cannot be stopped: one that times out or is
cancelled keeps its job leased (and heartbeated) until the thread returns,
and one that ignores its token past the shutdown deadline is left leased for
the reaper, which then decides, counting the attempt.

The clock rule: the worker sends the store no times of its own; leases,
retry times and snoozes are computed from the database's clock.

The worker depends on the ports in :mod:`jobrun.ports` only, never on psycopg.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
from typing import Any

from jobrun._gc_tuning import threshold_for_worker, young_threshold_raised
from jobrun._waiting import cancel_and_wait
from jobrun.config import DEFAULT_CLAIM_AHEAD, Config
from jobrun.domain import Job, Outcome, OutcomeKind
from jobrun.errors import ConfigurationError, UsageError
from jobrun.ports import Dispatcher, WorkerStore
from jobrun.reaper import Reaper
from jobrun.registry import Registry
from jobrun.telemetry.hooks import Observer
from jobrun.worker.claimer import Claimer
from jobrun.worker.completer import Completer, CompletionStats
from jobrun.worker.executor import JobExecutor
from jobrun.worker.handoff import Handoff
from jobrun.worker.heartbeat import Heartbeat
from jobrun.worker.presence import Presence
from jobrun.worker.reporter import Reporter
from jobrun.worker.runner import Runner
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.shutdown import HAND_BACK_TIMEOUT, Shutdown
from jobrun.worker.signals import WorkerSignals
from jobrun.worker.state import WorkerState

__all__ = ["DEFAULT_CLAIM_AHEAD", "Completer", "CompletionStats", "Worker", "default_owner"]

_log = logging.getLogger("jobrun.worker")


def default_owner() -> str:
    """``host:pid:random``: unique per worker, and says where a lease came from."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class Worker:
    """Runs the handlers of ``registry`` for the queues of ``config``, as many at once as it says.

    Every setting comes from ``config`` (:class:`~jobrun.config.Config`), which
    owns their defaults and has already refused bad values; the worker reads
    them through :meth:`~jobrun.worker.settings.WorkerSettings.from_config`
    and checks nothing again. What is not a setting is passed beside it:
    ``store`` and ``dispatcher`` are ports (:class:`jobrun.ports.WorkerStore`,
    :class:`jobrun.ports.Dispatcher`); without a dispatcher the worker polls
    every ``config.poll``. ``owner`` is the lease owner it claims as
    (:func:`default_owner` when not given). ``observer``
    (:class:`jobrun.telemetry.hooks.Observer`) is told of every claim, every attempt's
    outcome and every reap (metrics). With ``config.handoff`` and a dispatcher
    that can deliver them, enqueues lease jobs straight to its free slots
    (:mod:`jobrun.worker.handoff`; never in drain mode). While it runs,
    CPython's young-generation collection threshold is at least
    ``config.gc_young_threshold``, and 40 per slot of its concurrency
    (:mod:`jobrun._gc_tuning`).

    :attr:`signals` tells tests what the worker did (claimed, went idle,
    recorded outcomes), once they turn it on (:mod:`jobrun.worker.signals`).
    """

    signals: WorkerSignals
    """Test signals: off until a test calls ``signals.init()``."""

    def __init__(
        self,
        store: WorkerStore,
        registry: Registry,
        config: Config,
        *,
        owner: str | None = None,
        dispatcher: Dispatcher | None = None,
        observer: Observer | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if owner is not None and not owner:
            raise ConfigurationError("owner must not be empty")
        settings = WorkerSettings.from_config(config)
        self._compose(store, registry, settings, owner, dispatcher, observer, logger)

    def _compose(
        self,
        store: WorkerStore,
        registry: Registry,
        s: WorkerSettings,
        owner: str | None,
        dispatcher: Dispatcher | None,
        observer: Observer | None,
        logger: logging.Logger | None,
    ) -> None:
        self._settings = s
        self.dispatcher = dispatcher
        """Wakes the idle worker on notifications; None: it only polls."""
        self._log = log = logger or _log
        self.owner = owner = owner or default_owner()
        """The lease owner this worker claims as."""
        self.signals = WorkerSignals()
        self._state = state = WorkerState(s.concurrency, s.claim_ahead.total_seconds())
        self._completer = Completer(
            store, owner, max_batch=s.completion_batch, recorded=self.signals.recorded
        )
        submit = self._completer.submit
        self._executor = executor = JobExecutor(
            registry,
            job_timeout=s.job_timeout,
            threads=s.concurrency,
            unrunnable=s.unrunnable,
            dependencies=lambda job_id: store.dependencies_of(job_id, with_results=True),
        )
        reporter = Reporter(submit, owner=owner, observer=observer, log=log)
        self._runner = runner = Runner(
            state, executor.attempt, executor.execute, reporter.report, owner=owner, log=log
        )
        give_back = self._give_back
        self._handoff = Handoff(
            store,
            state,
            s,
            owner=owner,
            start=runner.start,
            give_back=give_back,
            observer=observer,
            log=log,
        )
        self._claimer = Claimer(
            store,
            state,
            s,
            owner=owner,
            offers=self._handoff,
            start_ahead=runner.start_ahead,
            give_back=give_back,
            request_stop=self.request_stop,
            observer=observer,
            signals=self.signals,
            log=log,
        )
        self._heartbeat = Heartbeat(store, state, s, owner=owner, submit=submit, log=log)
        self._presence = Presence(store, state, s, owner=owner, log=log)
        self._shutdown = Shutdown(
            state, s, owner=owner, give_back=give_back, log=log, draining=self.signals.draining
        )
        self._reaper = (
            Reaper(store, s.reap_every, logger=logger, observer=observer) if s.reap_every else None
        )
        self._started = False
        self._os_signals: list[int] = []

    # -- public surface ---------------------------------------------------------------------

    @property
    def running(self) -> int:
        """How many jobs this worker holds right now (running, reporting or claimed ahead)."""
        return self._state.held

    @property
    def stats(self) -> CompletionStats:
        """Running totals of this worker's completions (batches, re-invoked callbacks)."""
        return self._completer.stats

    def request_stop(self, *, graceful: bool = True) -> None:
        """Stop claiming; with ``graceful=False`` also skip the grace period for running jobs."""
        self._state.request_stop(graceful=graceful)
        self.signals.stopping.emit(graceful)

    def install_signal_handlers(self) -> None:
        """Stop on SIGTERM and SIGINT: gracefully on the first, at once on the second.

        Call it from inside the event loop that runs :meth:`run` (e.g. in the
        same ``async def main``, before awaiting ``run``); the handlers are
        removed when ``run`` returns.
        """
        loop = asyncio.get_running_loop()
        self._state.open()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal, sig)
            self._os_signals.append(sig)

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
        settings = self._settings
        threshold = threshold_for_worker(settings.gc_young_threshold, settings.concurrency)
        with young_threshold_raised(threshold):
            await self._run(stop, drain)

    # -- the run ------------------------------------------------------------------------------

    async def _run(self, stop: asyncio.Event | None, drain: bool) -> None:
        state = self._state
        state.open()
        background: list[asyncio.Task[Any]] = [
            asyncio.create_task(self._completer.run(), name="jobrun-completer"),
            asyncio.create_task(self._heartbeat.run(), name="jobrun-heartbeat"),
            asyncio.create_task(self._handoff.confirm(), name="jobrun-confirm"),
            asyncio.create_task(self._presence.run(), name="jobrun-presence"),
        ]
        if self._reaper is not None:
            background.append(asyncio.create_task(self._reaper.run(), name="jobrun-reaper"))
        if stop is not None:
            background.append(asyncio.create_task(self._watch(stop), name="jobrun-stop"))
        self._log.info(
            "worker %s started on queues %s, concurrency %d",
            self.owner,
            ",".join(self._settings.queues),
            self._settings.concurrency,
            extra={"owner": self.owner},
        )
        if self._settings.handoff and not drain:
            self._handoff.open(self.dispatcher)
        try:
            await self._claimer.run(self.dispatcher, drain=drain)
            await self._handoff.retract()
            await self._shutdown.drain()
        except asyncio.CancelledError:
            state.hard.set()
            await self._shutdown.drain()
            raise
        finally:
            await self._close(background)

    async def _close(self, background: list[asyncio.Task[Any]]) -> None:
        """Record what is left to record, stop the services, and say how the run went."""
        self._handoff.close()
        self._completer.close()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(background[0]), HAND_BACK_TIMEOUT)
        await cancel_and_wait(background)
        await self._presence.close()
        # Threads of sync handlers cannot be interrupted; don't wait for them.
        self._executor.shutdown()
        loop = asyncio.get_running_loop()
        for sig in self._os_signals:
            loop.remove_signal_handler(sig)
        self._os_signals.clear()
        self._completer.log_stopped(self._log)

    def _on_signal(self, sig: int) -> None:
        graceful = not self._state.stopping.is_set()
        self._log.warning(
            "received %s: %s",
            signal.Signals(sig).name,
            "finishing running jobs" if graceful else "handing running jobs back now",
        )
        self.request_stop(graceful=graceful)

    async def _watch(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.request_stop()

    def _give_back(self, job: Job, reason: str) -> None:
        """Hand ``job`` back unstarted: queued, due now, the attempt not counted."""
        self._completer.submit(Outcome(job=job, kind=OutcomeKind.RELEASE, detail=reason))
