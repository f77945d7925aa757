"""What a worker does with a job it cannot run: a few spaced retries, then ``dead``.

A worker cannot run a job whose type has no handler in its registry, or whose
payload does not validate against the handler's payload model. Producers that
know the registry refuse such jobs at enqueue (a :class:`~jobrun.client.Client`
holding a registry, ``jobrun enqueue --app``), so one that reaches a worker
most often means a rolling deploy: a newer producer wrote a job type, or a
payload field, that this older worker does not know yet, and a newer worker
will run it in minutes. Killing the job at once would lose it; retrying it on
its own backoff would keep a job that can never run for its whole budget
(25 attempts over about 13 hours by default).

So such a failure has its own bounded policy, :class:`UnrunnableRetry`: at
most ``attempts`` attempts (never more than the job's own ``max_attempts``),
``retry`` apart, then ``dead`` with the cause as its last error. The defaults,
4 attempts 20 minutes apart, give a deploy about an hour. The worker logs one
line per attempt naming the cause. Set through
:class:`~jobrun.config.Config` (``unrunnable_attempts``, ``unrunnable_retry``;
``JOBRUN_UNRUNNABLE_ATTEMPTS``, ``JOBRUN_UNRUNNABLE_RETRY``).

Nothing here does I/O: the store records the outcome, and the database's
``job_outcome_state`` decides, as for any failure, with the lower limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from jobrun.domain import MAX_ATTEMPTS_LIMIT, Job, Outcome, OutcomeKind, duration_problem
from jobrun.durations import format_duration
from jobrun.errors import ConfigurationError

__all__ = [
    "DEFAULT_UNRUNNABLE",
    "DEFAULT_UNRUNNABLE_ATTEMPTS",
    "DEFAULT_UNRUNNABLE_RETRY",
    "UnrunnableRetry",
]

DEFAULT_UNRUNNABLE_ATTEMPTS = 4
"""Attempts a job the worker cannot run gets, at most, before it ends dead."""
DEFAULT_UNRUNNABLE_RETRY = timedelta(minutes=20)
"""The wait between those attempts: with the default attempts, about an hour in all."""


@dataclass(frozen=True, slots=True)
class UnrunnableRetry:
    """The retry policy of a job the worker cannot run (unknown type, invalid payload)."""

    attempts: int = DEFAULT_UNRUNNABLE_ATTEMPTS
    """At most this many attempts (or the job's own max_attempts, if lower)."""
    retry: timedelta = DEFAULT_UNRUNNABLE_RETRY
    """How long the job waits before the next attempt."""

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or not 1 <= self.attempts <= MAX_ATTEMPTS_LIMIT
        ):
            raise ConfigurationError(
                f"unrunnable_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, "
                f"got {self.attempts!r}"
            )
        if not isinstance(self.retry, timedelta):
            raise ConfigurationError(f"unrunnable_retry must be a timedelta, got {self.retry!r}")
        problem = duration_problem("unrunnable_retry", self.retry, positive=True)
        if problem is not None:
            raise ConfigurationError(problem)

    def outcome(self, job: Job, cause: str) -> Outcome:
        """The failed attempt of ``job`` (as claimed) that ``cause`` kept from running.

        Its detail names the cause and the policy, so the log line and, once
        the job is dead, its last error say why.
        """
        limit = min(self.attempts, job.max_attempts)
        detail = (
            f"{cause} (this worker cannot run the job: attempt {job.attempts} of at most "
            f"{limit}, {format_duration(self.retry)} apart, in case a worker that can "
            "run it is being deployed)"
        )
        return Outcome(
            job=job,
            kind=OutcomeKind.FAIL,
            detail=detail,
            delay=self.retry,
            max_attempts=self.attempts,
        )


DEFAULT_UNRUNNABLE = UnrunnableRetry()
"""The default policy: 4 attempts, 20 minutes apart."""
