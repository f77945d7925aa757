"""The wall-clock bound on one completion transaction, async and sync.

A completion with commit callbacks runs the caller's code inside the transaction;
these bound how long it may take (``commit_timeout``), each in the way its kind of
store can stop work: the async one cancels, the sync one can only refuse late.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

from jobrun.errors import (
    CommitTimeout,
)

__all__ = ["CommitDeadline", "SyncCommitDeadline", "commit_timeout_error"]


class CommitDeadline:
    """The async store's wall-clock bound on one completion transaction.

    ``async with`` it around the transaction's body: when ``limit`` has passed,
    the task is cancelled wherever it awaits (a commit callback's HTTP call, a
    statement), the block ends with TimeoutError and the transaction, left
    by that error, rolls back. :meth:`expired` then says the limit was the cause.
    """

    def __init__(self, limit: timedelta) -> None:
        self.limit = limit
        self._timeout: asyncio.Timeout | None = None

    async def __aenter__(self) -> CommitDeadline:
        self._timeout = asyncio.timeout(self.limit.total_seconds())
        await self._timeout.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._timeout is not None
        await self._timeout.__aexit__(*exc_info)

    def expired(self) -> bool:
        """Whether the limit passed inside the block (and the block was cancelled)."""
        return self._timeout is not None and self._timeout.expired()

    def error(self, *, callback: bool) -> CommitTimeout:
        """The error a job gets when its completion ran out of time."""
        return commit_timeout_error(self.limit, callback=callback, stopped=True)


class SyncCommitDeadline:
    """The sync store's bound on one completion transaction: checked, not enforced.

    A thread cannot be interrupted, so a commit callback blocked outside the
    database runs to its end; the store asks :meth:`expired` when it returns
    and rolls the transaction back if the limit passed, so late work never
    commits. Until then the job's row lock stays held: ``statement_timeout``
    bounds each statement, but nothing bounds the time spent between them,
    and the pool's ``idle_in_transaction_session_timeout`` does not apply
    either (in pipeline mode, with no Sync sent, the server shows the session
    ``active``, not idle in transaction). Sync callbacks must stay short.
    """

    def __init__(self, limit: timedelta) -> None:
        self.limit = limit
        self._end: float | None = None

    def __enter__(self) -> SyncCommitDeadline:
        self._end = time.monotonic() + self.limit.total_seconds()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        return None

    def expired(self) -> bool:
        """Whether the limit has passed since the block was entered."""
        return self._end is not None and time.monotonic() >= self._end

    def error(self, *, callback: bool) -> CommitTimeout:
        """The error a job gets when its completion ran out of time."""
        return commit_timeout_error(self.limit, callback=callback, stopped=False)


def commit_timeout_error(limit: timedelta, *, callback: bool, stopped: bool) -> CommitTimeout:
    """CommitTimeout naming the limit, and the callback when one was running at the time."""
    text = f"the completion transaction ran past the commit timeout of {limit.total_seconds():g}s"
    if callback:
        verb = "was cancelled" if stopped else "ran past it"
        text += f"; its commit callback {verb}, and everything it wrote was rolled back"
    else:
        text += " and was rolled back"
    return CommitTimeout(text)
