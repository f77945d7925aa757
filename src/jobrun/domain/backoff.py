"""A job's retry policy: how long it waits after a failed attempt."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import ClassVar

from pydantic import ConfigDict, model_validator

from jobrun.domain.inputs import InputModel
from jobrun.domain.rules import duration_problem

__all__ = ["DEFAULT_BACKOFF", "Backoff", "BackoffKind"]


class BackoffKind(StrEnum):
    """How the wait before a retry grows with the attempt number."""

    CONSTANT = "constant"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"


class Backoff(InputModel):
    """A job's own retry policy: wait ``base`` grown by ``kind``, never more than ``max``.

    After failed attempt ``n`` (1 for the first run) a job waits ``base``
    (constant), ``base * n`` (linear) or ``base * 2**(n-1)`` (exponential),
    capped at ``max``, then spread by the store's ``retry_jitter``. The
    arithmetic runs in the database (``job_backoff_delay``, migration 00003),
    the one place it is written, for failures and reaped leases alike.
    """

    _what: ClassVar[str] = "backoff"

    model_config = ConfigDict(frozen=True)

    kind: BackoffKind = BackoffKind.EXPONENTIAL
    base: timedelta = timedelta(seconds=1)
    max: timedelta = timedelta(hours=1)

    @model_validator(mode="after")
    def _check(self) -> Backoff:
        if self.base <= timedelta(0):
            raise ValueError("backoff base must be positive")
        if self.max < self.base:
            raise ValueError("backoff max must be at least base")
        problem = duration_problem("backoff max", self.max)
        if problem is not None:
            raise ValueError(problem)
        return self


DEFAULT_BACKOFF = Backoff()
"""Exponential from 1 second, capped at 1 hour: the policy of a job that names none."""
