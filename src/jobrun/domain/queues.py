"""Queues as the dashboard, the CLI and the gauges see them: backlog, controls, limits.

A queue is not a stored thing of its own: it is the name its jobs carry, plus
an optional row of controls (pause, concurrency and rate limits) that the
claim enforces across every worker. What makes a queue *name* valid is a rule
every entry point shares (:func:`~jobrun.domain.rules.queue_name_problem`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from jobrun.domain.jobs import JobState
from jobrun.domain.rules import MAX_CONCURRENCY_LIMIT, duration_problem

__all__ = [
    "MAX_QUEUE_LIMIT",
    "QueueControls",
    "QueueDepth",
    "QueueInfo",
    "QueueStats",
    "StateCounts",
    "queue_limits_problem",
]


class StateCounts(BaseModel):
    """How many jobs are in each state, in work bounded by the jobs not succeeded.

    Every count is exact but ``succeeded_estimate``: the server's estimate
    of the live rows of ``jobs`` less the other states, for a state that may
    hold most of a big table.
    """

    queued: int
    leased: int
    waiting: int
    dead: int
    cancelled: int
    succeeded_estimate: int

    def by_state(self) -> dict[JobState, int]:
        """Each state's count, in lifecycle order (succeeded's being the estimate)."""
        return {
            JobState.WAITING: self.waiting,
            JobState.QUEUED: self.queued,
            JobState.LEASED: self.leased,
            JobState.SUCCEEDED: self.succeeded_estimate,
            JobState.DEAD: self.dead,
            JobState.CANCELLED: self.cancelled,
        }


class QueueDepth(BaseModel):
    """How many jobs one queue holds in one state."""

    queue: str
    state: JobState
    count: int
    oldest_created_at: datetime | None


class QueueStats(BaseModel):
    """One queue's backlog as the claim sees it, read from the partial indexes only.

    ``lag`` is how long the oldest *due* job has waited since its ``run_at``
    (zero when none is due): a job delayed to later is not late.
    """

    queue: str
    queued: int
    """Jobs waiting, due or not."""
    due: int
    """Waiting jobs whose run_at has come."""
    leased: int
    """Jobs running (leased) right now."""
    lag: timedelta
    """Database now minus the oldest due job's run_at; zero when none is due."""


MAX_QUEUE_LIMIT = 2**31 - 1
"""The largest concurrency limit or rate count a queue can have (a PostgreSQL integer)."""


def queue_limits_problem(
    concurrency: int | None, rate: tuple[int, timedelta] | None, key_limit: int | None = None
) -> str | None:
    """Why ``concurrency``, ``rate`` and ``key_limit`` are not limits a queue can have, or None.

    Each count must be a whole number (a bool is not one) in range, the
    interval a positive timedelta.
    """
    if concurrency is None and rate is None and key_limit is None:
        return "give a concurrency limit, a rate, or both; or a limit per key"
    if key_limit is not None:
        if not _is_whole(key_limit):
            return f"limit per key must be a whole number, got {key_limit!r}"
        if not 1 <= key_limit <= MAX_CONCURRENCY_LIMIT:
            return f"limit per key must be between 1 and {MAX_CONCURRENCY_LIMIT}, got {key_limit}"
    if concurrency is not None:
        if not _is_whole(concurrency):
            return f"concurrency limit must be a whole number, got {concurrency!r}"
        if not 1 <= concurrency <= MAX_QUEUE_LIMIT:
            return f"concurrency limit must be between 1 and {MAX_QUEUE_LIMIT}, got {concurrency}"
    if rate is not None:
        if not isinstance(rate, tuple | list) or len(rate) != 2:
            return f"rate must be (count, interval), got {rate!r}"
        count, interval = rate
        if not _is_whole(count):
            return f"rate count must be a whole number, got {count!r}"
        if not 1 <= count <= MAX_QUEUE_LIMIT:
            return f"rate count must be between 1 and {MAX_QUEUE_LIMIT}, got {count}"
        if not isinstance(interval, timedelta):
            return f"rate interval must be a timedelta, got {interval!r}"
        return duration_problem("rate interval", interval, positive=True)
    return None


def _is_whole(value: object) -> bool:
    # A bool is an int to Python but not a count to anyone; a float would be
    # rounded silently by the database.
    return isinstance(value, int) and not isinstance(value, bool)


class QueueControls(BaseModel):
    """A queue's controls, as the claim enforces them across every worker.

    A queue nobody has paused or limited has no stored row and reads as these
    defaults: not paused, no limits. ``concurrency_limit`` caps the queue's
    leased jobs across all workers; ``rate_limit`` claims per ``rate_interval``
    cap how fast its jobs are claimed (counted in fixed windows aligned to the
    epoch, see the README's "Queue controls"). ``changed_by`` names who made the
    last pause, resume or limit change (e.g. ``ops via web``); None when that
    change named nobody.
    """

    name: str
    paused: bool = False
    concurrency_limit: int | None = None
    rate_limit: int | None = None
    rate_interval: timedelta | None = None
    key_limit: int | None = None
    """The limit per concurrency key of its keyed jobs that give none of their own."""
    changed_by: str | None = None


class QueueInfo(QueueControls):
    """A queue's controls and its load right now: jobs queued (due or not) and leased."""

    queued: int = 0
    leased: int = 0
