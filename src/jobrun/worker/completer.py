"""The completer: records finished attempts' outcomes in batches.

Finished attempts queue up; the completer sends whatever is ready in one
``store.record_outcomes``, which records every outcome without a callback in
one statement and the ones with a callback in one group-commit transaction.
It never waits on a timer: an idle worker completes a lone job at once, a
busy one builds big batches because jobs keep finishing while the previous
batch commits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from jobrun._endings import ending, plural, stop_summary
from jobrun.domain import Job, Outcome
from jobrun.errors import ConfigurationError
from jobrun.ports import Executor
from jobrun.worker.signals import Signal

__all__ = ["Completer", "CompletionStats"]


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
    endings: dict[str, int] = field(default_factory=dict)
    """How many attempts ended each way (``succeeded``, ``failed``, ``dead``,
    ``cancelled``, ``snoozed``, ``handed_back``, ``lease_lost``, ``not_recorded``)."""


class Completer:
    """Records finished attempts' outcomes in batches through ``store.record_outcomes``.

    :meth:`submit` returns a future resolved with the completed :class:`Job`
    or the error for that job (an exception *value*, never raised into the
    future, so nobody has to retrieve it). At most ``max_inflight`` batches
    are committing at once; everything submitted meanwhile forms the next
    batch, up to ``max_batch`` jobs. ``recorded`` (a test signal, see
    :mod:`jobrun.worker.signals`) is told of every batch once its results are in.
    """

    def __init__(
        self,
        store: Executor,
        owner: str,
        *,
        max_batch: int = 1000,
        max_inflight: int = 2,
        recorded: Signal[Sequence[tuple[Outcome, Job | BaseException]]] | None = None,
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
        self._recorded = recorded if recorded is not None else Signal("recorded")
        self.stats = CompletionStats()
        """Totals of the batches sent so far."""

    def log_stopped(self, log: logging.Logger) -> None:
        """Log the worker's closing line: how its attempts ended, in how many batches."""
        stats = self.stats
        log.info(
            "worker %s stopped: %s (%s recorded in %s; %s run again after a group rollback)",
            self._owner,
            stop_summary(stats.endings),
            plural(stats.jobs, "outcome"),
            plural(stats.batches, "batch", "batches"),
            plural(stats.callback_reinvocations, "commit callback"),
            extra={
                "owner": self._owner,
                "completed": stats.endings.get("succeeded", 0),
                "endings": dict(stats.endings),
                "outcomes": stats.jobs,
                "completion_batches": stats.batches,
                "callback_reinvocations": stats.callback_reinvocations,
            },
        )

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
            endings = stats.endings
            for (outcome, fut), result in zip(batch, results, strict=False):
                name = ending(outcome.kind, result)
                endings[name] = endings.get(name, 0) + 1
                if not fut.done():
                    fut.set_result(result)
            if self._recorded.on:
                self._recorded.emit(list(zip(completions, results, strict=False)))
