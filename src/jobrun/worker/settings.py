"""A worker's settings, checked together before anything runs.

:class:`WorkerSettings` holds what :class:`jobrun.worker.Worker` takes as
keywords (or :meth:`WorkerSettings.from_config` reads from a
:class:`jobrun.config.Config`), and refuses a bad combination with one
:class:`~jobrun.errors.ConfigurationError` naming the setting.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import timedelta
from typing import Any

from jobrun.config import DEFAULT_CLAIM_AHEAD, DEFAULT_YOUNG_THRESHOLD, Config
from jobrun.errors import ConfigurationError
from jobrun.unrunnable import DEFAULT_UNRUNNABLE, UnrunnableRetry

__all__ = ["WorkerSettings"]


def _positive(name: str, value: timedelta | None) -> None:
    if value is not None and value <= timedelta(0):
        raise ConfigurationError(f"{name} must be positive, got {value}")


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """What a worker is told, validated on construction (see :class:`jobrun.worker.Worker`)."""

    queues: tuple[str, ...] = ("default",)
    concurrency: int = 10
    lease: timedelta = timedelta(seconds=30)
    heartbeat_every: timedelta = timedelta(seconds=10)
    poll_every: timedelta = timedelta(seconds=1)
    job_timeout: timedelta | None = None
    shutdown_grace: timedelta = timedelta(seconds=30)
    owner: str | None = None
    reap_every: timedelta | None = timedelta(seconds=5)
    completion_batch: int = 1000
    handoff: bool = True
    gc_young_threshold: int | None = DEFAULT_YOUNG_THRESHOLD
    claim_ahead: timedelta = DEFAULT_CLAIM_AHEAD
    unrunnable: UnrunnableRetry = DEFAULT_UNRUNNABLE

    def __post_init__(self) -> None:
        queues = self.queues
        if not queues or any(not q for q in queues):
            raise ConfigurationError("a worker needs at least one non-empty queue name")
        # Each queue once, in the order given.
        object.__setattr__(self, "queues", tuple(dict.fromkeys(queues)))
        if self.concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, got {self.concurrency}")
        _positive("lease", self.lease)
        _positive("heartbeat_every", self.heartbeat_every)
        _positive("poll_every", self.poll_every)
        _positive("job_timeout", self.job_timeout)
        _positive("reap_every", self.reap_every)
        if self.shutdown_grace < timedelta(0):
            raise ConfigurationError(
                f"shutdown_grace must not be negative, got {self.shutdown_grace}"
            )
        if self.claim_ahead < timedelta(0):
            raise ConfigurationError(f"claim_ahead must not be negative, got {self.claim_ahead}")
        if self.heartbeat_every > self.lease / 3:
            raise ConfigurationError(
                f"heartbeat_every ({self.heartbeat_every}) must be at most a third of the lease "
                f"({self.lease}), so a late heartbeat still lands before the lease expires"
            )
        if self.owner is not None and not self.owner:
            raise ConfigurationError("owner must not be empty")
        if self.gc_young_threshold is not None and self.gc_young_threshold < 1:
            raise ConfigurationError(
                f"gc_young_threshold must be positive (or None), got {self.gc_young_threshold}"
            )

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

    def keywords(self) -> dict[str, Any]:
        """These settings as :class:`jobrun.worker.Worker`'s keyword arguments."""
        return {field.name: getattr(self, field.name) for field in fields(self)}
