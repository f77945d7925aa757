"""What a handler receives and may raise: its context, its cancellation token, and the
exceptions that end or postpone its job.

Kept apart from :mod:`jobrun.registry` (which re-exports every name here) so
that the registry holds the lookup of handlers and this module what a running
handler sees. Nothing here touches the database: the reads a handler may
ask for (:meth:`JobContext.dependencies`) go through the reader the worker
gives the context.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta
from uuid import UUID

from jobrun.domain import Dependency, Job, key_lock_id, progress_report, storable_text
from jobrun.durations import format_duration
from jobrun.errors import ConfigurationError

__all__ = [
    "MAX_SNOOZE",
    "Cancel",
    "CancellationToken",
    "DependencyReader",
    "JobContext",
    "Snooze",
]

DependencyReader = Callable[[UUID], Awaitable[list[Dependency]]]
"""Reads a job's dependencies with their outcomes and results (the worker's store)."""


class Cancel(Exception):
    """Raise in a handler to end its job at once: cancelled, not retried.

    ``reason`` becomes the job's last error and its event's detail. Unlike a
    failure, no attempt is left for a retry; an operator can still
    ``jobrun jobs retry`` it.
    """

    def __init__(self, reason: str = "cancelled by its handler") -> None:
        super().__init__(reason)
        self.reason = reason or "cancelled by its handler"


class Snooze(Exception):
    """Raise in a handler to run its job again after ``delay``, without spending an attempt.

    For work that cannot proceed yet (a resource is busy, a rate limit was
    hit): the job goes back to its queue, due ``delay`` from database now,
    and its attempt count is what it was before this run.
    """

    def __init__(self, delay: timedelta) -> None:
        if not isinstance(delay, timedelta) or delay < timedelta(0):
            raise ConfigurationError(f"Snooze needs a non-negative timedelta, got {delay!r}")
        if delay > MAX_SNOOZE:
            longest = format_duration(MAX_SNOOZE)
            raise ConfigurationError(
                f"Snooze delay {format_duration(delay)} is longer than {longest}"
            )
        super().__init__(f"snoozed for {format_duration(delay)}")
        self.delay = delay


MAX_SNOOZE = timedelta(days=365)
"""The longest a handler may snooze its job."""


class CancellationToken:
    """A thread-safe flag a handler checks to learn that its job should stop.

    Async handlers are also cancelled through ``asyncio`` (their task receives
    ``CancelledError``); sync handlers run in a thread that cannot be
    interrupted, so the token is how they learn it. It is set when the job is
    cancelled by an operator, loses its lease, times out or the worker shuts
    down.
    """

    __slots__ = ("_event", "_flag", "reason")

    def __init__(self) -> None:
        # The threading.Event is made on the first wait() only: a worker builds
        # a token for every job, and most jobs never wait on theirs.
        self._event: threading.Event | None = None
        self._flag = False
        self.reason: str | None = None

    def set(self, reason: str = "cancelled") -> None:
        """Ask the job to stop; the first reason given is kept."""
        with _token_lock:
            if self.reason is None:
                self.reason = reason
            self._flag = True
            if self._event is not None:
                self._event.set()

    def is_set(self) -> bool:
        """True once the job has been asked to stop."""
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Block (in a sync handler) until asked to stop or ``timeout`` passes; True if asked."""
        if self._flag:
            return True
        with _token_lock:
            if self._event is None:
                self._event = threading.Event()
                if self._flag:
                    self._event.set()
            event = self._event
        return event.wait(timeout)


_token_lock = threading.Lock()


class JobContext:
    """What a handler learns about the job it runs."""

    __slots__ = ("_logger", "_loop", "_read_dependencies", "job", "lock_keys", "reported", "token")

    def __init__(
        self,
        job: Job,
        token: CancellationToken | None = None,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
        *,
        dependencies: DependencyReader | None = None,
    ) -> None:
        self.job = job
        self._read_dependencies = dependencies
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        """The claimed job, as the store returned it."""
        self.token = token if token is not None else CancellationToken()
        """Set when the job should stop; sync handlers should check it."""
        self._logger = logger
        self.lock_keys: tuple[str, ...] = ()
        """The keys :meth:`lock` asked for, in the order asked."""
        self.reported: tuple[float, str] | None = None
        """The latest :meth:`progress` report, as ``(fraction, message)``; None before any."""

    def progress(self, fraction: float, message: str = "") -> None:
        """Say how far the job is: ``fraction`` from 0 to 1 and a short ``message``.

        Call it as often as you like, from an async or a sync handler: the
        worker's next heartbeat writes the latest report (no write per call),
        and ``jobrun jobs show`` and the dashboard show it while the job
        runs. A fraction outside 0..1, or a message over 200 characters,
        raises ValueError. A NUL or a lone surrogate in the message is kept
        written out (``\\x00``): one heartbeat writes the reports of all the
        worker's jobs, and a text column refuses those characters.
        """
        if isinstance(message, str):
            message = storable_text(message)
        self.reported = progress_report(fraction, message)

    def lock(self, *keys: str) -> None:
        """Hold these application keys while the commit callback runs.

        For a callback that reads and writes state shared with other jobs (a
        counter per site and address, say): the completion transaction takes a
        transaction-scoped advisory lock per key before any callback runs, so
        two jobs of one key never interleave their read-modify-write, jobs of
        other keys never wait, and the locks of a whole group are taken in one
        global order, so groups never deadlock. The locks end with the
        transaction. Call it from the handler, before returning the callback.
        """
        for key in keys:
            key_lock_id(key)  # refuse a bad key here, not in the completer
        self.lock_keys = tuple(dict.fromkeys((*self.lock_keys, *keys)))

    async def dependencies(self) -> list[Dependency]:
        """The jobs this one waited for (``NewJob.depends_on``), and what became of each.

        Each :class:`~jobrun.domain.Dependency` has its state, attempts, last
        error and, when it succeeded with one, its result: what a group's
        callback reads to report on its parts. Read from the database when
        called (one statement), in the order of the dependencies' ids; an
        empty list for a job without dependencies. From a sync handler, call
        :meth:`dependencies_sync`.
        """
        if self._read_dependencies is None:
            return []
        return await self._read_dependencies(self.job.id)

    def dependencies_sync(self) -> list[Dependency]:
        """:meth:`dependencies` for a sync handler: blocks its thread until the read is done.

        The read runs on the worker's event loop; calling this on that loop
        (from an async handler) raises RuntimeError, since it would wait for
        itself: there, ``await ctx.dependencies()``.
        """
        if self._read_dependencies is None:
            return []
        loop = self._loop
        if loop is None:
            raise RuntimeError("this context was made outside an event loop; it cannot read")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError("in an async handler, use `await ctx.dependencies()`")
        return asyncio.run_coroutine_threadsafe(self.dependencies(), loop).result()

    @property
    def logger(self) -> logging.Logger | logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry the job's id, type and attempt."""
        if self._logger is None:
            # Built on first use: most handlers at high throughput never log.
            self._logger = logging.LoggerAdapter(
                logging.getLogger("jobrun.handler"),
                {
                    "job_id": str(self.job.id),
                    "job_type": self.job.type,
                    "attempt": self.job.attempts,
                },
            )
        return self._logger

    @property
    def attempt(self) -> int:
        """This attempt's number, 1 for the first run."""
        return self.job.attempts

    @property
    def cancelled(self) -> bool:
        """True once the job has been asked to stop."""
        return self.token.is_set()
