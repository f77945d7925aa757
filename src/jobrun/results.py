"""Reading a job's result, waiting for it if asked: the logic behind :meth:`jobrun.Client.result`.

A handler's return value is stored with its job's completion (see
:class:`~jobrun.domain.Result`). Reading it back is one query; waiting for
it is that query again whenever the job is announced finished on
'jobrun.finished' (a stored result, a job left dead or cancelled) and, in
case a notification is lost or never sent (a job that succeeded returning
nothing, one cancelled while queued, one the reaper killed), every ``poll``.
The watch is taken before the first read, so a job finishing between the
read and the wait still wakes it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol
from uuid import UUID

from pydantic import TypeAdapter, ValidationError

from jobrun.domain import JobState, StoredResult, parse_job_id
from jobrun.errors import InvalidResult, JobNotSucceeded, ResultNotReady
from jobrun.registry import Registry

__all__ = [
    "DEFAULT_RESULT_POLL",
    "ResultReader",
    "ResultWaiter",
    "SyncResultReader",
    "result_sync",
    "typed_value",
]

DEFAULT_RESULT_POLL = timedelta(seconds=1)
"""How often a wait reads the job again without a notification."""


class FinishWatch(Protocol):
    """One job's one-slot signal (``FinishWatcher.watch``)."""

    async def wait(self, timeout: timedelta) -> bool: ...  # noqa: ASYNC109 - a Subscription's
    def close(self) -> None: ...


class Watcher(Protocol):
    """What hears that jobs finished (``jobrun.postgres.FinishWatcher``)."""

    def watch(self, job_id: UUID | str) -> FinishWatch: ...
    async def close(self) -> None: ...


class ResultReader(Protocol):
    """The store's read of a job's result (``Store.result_of``)."""

    async def result_of(self, job_id: UUID) -> StoredResult:
        """The job's state and result; JobNotFound when there is no such job."""
        ...


class ResultWaiter:
    """Reads results through ``reader``; waits with the watcher ``open_watcher`` starts.

    The watcher (one LISTEN connection) is opened at the first wait and kept
    until :meth:`close`; when ``open_watcher`` gives None (LISTEN is off, or
    behind PgBouncer without a direct URL) a wait only polls. ``registry``
    supplies each job type's declared result type.
    """

    def __init__(
        self,
        reader: Callable[[], ResultReader],
        open_watcher: Callable[[], Awaitable[Watcher | None]],
        registry: Registry,
        *,
        poll: timedelta = DEFAULT_RESULT_POLL,
    ) -> None:
        self._reader = reader
        self._open_watcher = open_watcher
        self._registry = registry
        self._poll = poll.total_seconds()
        self._watcher: Watcher | None = None
        self._polls_only = False

    async def result(
        self, job_id: UUID | str, *, wait: timedelta | float | None = None, model: Any = None
    ) -> Any:
        """What ``job_id``'s handler returned; see :meth:`jobrun.Client.result`."""
        seconds = _seconds(wait)
        job_id = parse_job_id(job_id)
        reader = self._reader()
        watch = None
        if seconds > 0 and not self._polls_only:
            if self._watcher is None:
                self._watcher = await self._open_watcher()
                self._polls_only = self._watcher is None
            if self._watcher is not None:
                watch = self._watcher.watch(job_id)
        deadline = time.monotonic() + seconds
        try:
            while True:
                found = await reader.result_of(job_id)
                if _finished(found, seconds, deadline):
                    return typed_value(found, model, self._registry)
                left = max(0.0, deadline - time.monotonic())
                pause = timedelta(seconds=min(left, self._poll))
                if watch is not None:
                    await watch.wait(pause)
                else:
                    await asyncio.sleep(pause.total_seconds())
        finally:
            if watch is not None:
                watch.close()

    async def close(self) -> None:
        """Close the watcher's connection, if one was opened."""
        watcher, self._watcher = self._watcher, None
        self._polls_only = False
        if watcher is not None:
            await watcher.close()


def typed_value(found: StoredResult, model: Any, registry: Registry) -> Any:
    """``found``'s value validated into ``model``, else its type's declared result type."""
    if model is None:
        handler = registry.get(found.type)
        model = handler.result_type if handler is not None else None
    if model is None or found.value is None:
        return found.value
    try:
        return TypeAdapter(model).validate_python(found.value)
    except ValidationError as exc:
        raise InvalidResult(
            f"result of job {found.job_id} does not validate as {model!r}: "
            f"{exc.error_count()} error(s), first: {exc.errors()[0]['msg']}"
        ) from None


class SyncResultReader(Protocol):
    """The sync store's read of a job's result (``SyncStore.result_of``)."""

    def result_of(self, job_id: UUID) -> StoredResult:
        """The job's state and result; JobNotFound when there is no such job."""
        ...


def result_sync(
    reader: SyncResultReader,
    registry: Registry,
    job_id: UUID | str,
    *,
    wait: timedelta | float | None = None,
    model: Any = None,
) -> Any:
    """:meth:`ResultWaiter.result` for synchronous code: it polls, from 50 ms up to every second."""
    seconds = _seconds(wait)
    job_id = parse_job_id(job_id)
    deadline = time.monotonic() + seconds
    pause = 0.05
    while True:
        found = reader.result_of(job_id)
        if _finished(found, seconds, deadline):
            return typed_value(found, model, registry)
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
        pause = min(pause * 2, DEFAULT_RESULT_POLL.total_seconds())


def _seconds(wait: timedelta | float | None) -> float:
    seconds = wait.total_seconds() if isinstance(wait, timedelta) else float(wait or 0)
    if seconds < 0:
        raise ValueError(f"wait must not be negative, got {wait!r}")
    return seconds


def _finished(found: StoredResult, seconds: float, deadline: float) -> bool:
    """True once ``found`` succeeded; raises for a job that ended otherwise or ran out of time."""
    if found.state is JobState.SUCCEEDED:
        return True
    if found.state in (JobState.DEAD, JobState.CANCELLED):
        raise JobNotSucceeded(found.job_id, found.state.value, found.error)
    if deadline - time.monotonic() <= 0:
        raise ResultNotReady(found.job_id, found.state.value, seconds)
    return False
