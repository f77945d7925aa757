"""The worker processes that are alive, as each reports itself (migration 00017)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

__all__ = ["MAX_REPORTED_RUNNING", "RunningJob", "WorkerInfo", "WorkerReport"]

MAX_REPORTED_RUNNING = 100
"""The most running jobs a worker lists in its row (it counts them all)."""


@dataclass(frozen=True, slots=True)
class RunningJob:
    """One job a worker runs, as the worker reported it."""

    id: UUID
    type: str
    queue: str
    started_at: datetime
    """When its attempt started, by the worker's clock."""


@dataclass(frozen=True, slots=True)
class WorkerReport:
    """What a worker writes in its row each heartbeat interval (see :class:`WorkerInfo`)."""

    owner: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...]
    concurrency: int
    beat: timedelta
    started_at: datetime
    running: tuple[RunningJob, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One worker process: where it runs, what it serves, and what it runs now.

    ``owner`` is the name it leases jobs under (``host:pid:random``), the
    ``lease_owner`` of its jobs and the ``owner`` of their events. ``alive``
    is False once it has not written its row for three of its heartbeat
    intervals (``beat``): it stopped without saying so, or cannot reach the
    database. ``leased`` counts the jobs leased under its name in the jobs
    table; ``running`` is its own list (at most :data:`MAX_REPORTED_RUNNING`),
    as of ``last_seen_at``.
    """

    owner: str
    host: str
    pid: int
    version: str
    queues: tuple[str, ...]
    concurrency: int
    beat: timedelta
    started_at: datetime
    last_seen_at: datetime
    alive: bool
    leased: int
    running: tuple[RunningJob, ...]
    seen_at: datetime
    """The database's time when this was read (ages are measured from it)."""
