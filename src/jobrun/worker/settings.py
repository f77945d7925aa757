"""A worker's settings: a plain view of a :class:`jobrun.config.Config`.

:class:`WorkerSettings` holds the values the worker's services read, under
the names they read them by. It declares no defaults and checks nothing:
``Config`` owns every default and refuses every bad value (and combination)
once, before a worker is built; :meth:`WorkerSettings.from_config` is how one
is made.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from jobrun.config import Config
from jobrun.unrunnable import UnrunnableRetry

__all__ = ["WorkerSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """What a worker is told, read from a validated ``Config`` (see :meth:`from_config`)."""

    queues: tuple[str, ...]
    concurrency: int
    lease: timedelta
    heartbeat_every: timedelta
    poll_every: timedelta
    job_timeout: timedelta | None
    shutdown_grace: timedelta
    reap_every: timedelta | None
    completion_batch: int
    handoff: bool
    gc_young_threshold: int | None
    claim_ahead: timedelta
    unrunnable: UnrunnableRetry

    @classmethod
    def from_config(cls, config: Config) -> WorkerSettings:
        """The worker settings of ``config`` (what ``jobrun worker`` runs with)."""
        return cls(
            queues=tuple(config.queues),
            concurrency=config.concurrency,
            lease=config.lease,
            heartbeat_every=config.heartbeat,
            poll_every=config.poll,
            job_timeout=config.job_timeout,
            shutdown_grace=config.shutdown_grace,
            reap_every=config.reap_every,
            completion_batch=config.completion_batch,
            handoff=config.handoff,
            gc_young_threshold=config.gc_young_threshold,
            claim_ahead=config.claim_ahead,
            unrunnable=config.unrunnable,
        )
