"""How long each kind of finished row is kept: the retention ages, as the pruner reads them.

:class:`Retention` is the value the maintenance service prunes by
(:class:`jobrun.maintenance.Maintenance`), built by
:class:`jobrun.config.Config` from its ``retention_*`` settings, which own the
defaults. :func:`retention_problem` is the one check of those ages: ``Config``
runs it once, so a ``Retention`` is never checked again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from jobrun.domain import JobState, duration_problem
from jobrun.durations import format_duration

__all__ = ["Retention", "retention_problem"]


@dataclass(frozen=True, kw_only=True)
class Retention:
    """How long each kind of row is kept (``Config.retention`` builds it, checked).

    Job ages count from when the job finished; event and ledger ages from
    when the row was written. ``effects`` is at least ``succeeded``: a
    ledger row should outlive the succeeded job it guards, so an idempotency
    key replayed after the job is purged still finds its effect recorded.
    """

    succeeded: timedelta
    """Succeeded jobs are deleted this long after they finished."""
    cancelled: timedelta
    """Cancelled jobs are deleted this long after they finished."""
    dead: timedelta
    """Dead jobs (attempts spent) are deleted this long after they died."""
    events: timedelta
    """Events are deleted this long after they were recorded."""
    effects: timedelta
    """Ledger rows are deleted this long after their effect, once no job of their key is left."""

    def job_ages(self) -> list[tuple[JobState, timedelta]]:
        """Each terminal state with its retention, in the order a pass purges them."""
        return [
            (JobState.SUCCEEDED, self.succeeded),
            (JobState.CANCELLED, self.cancelled),
            (JobState.DEAD, self.dead),
        ]


def retention_problem(
    prefix: str,
    *,
    succeeded: timedelta,
    cancelled: timedelta,
    dead: timedelta,
    events: timedelta,
    effects: timedelta,
) -> str | None:
    """Why these retention ages cannot work together, or None; names are ``prefix`` + field."""
    ages = {
        "succeeded": succeeded,
        "cancelled": cancelled,
        "dead": dead,
        "events": events,
        "effects": effects,
    }
    for name, age in ages.items():
        problem = duration_problem(prefix + name, age, positive=True)
        if problem is not None:
            return problem
    if effects < succeeded:
        return (
            f"{prefix}effects ({format_duration(effects)}) must be at least {prefix}succeeded "
            f"({format_duration(succeeded)}): the ledger must outlive the jobs it guards"
        )
    return None
