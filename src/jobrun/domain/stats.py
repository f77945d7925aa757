"""What the charts show: attempts ended per minute, and how long jobs waited and ran.

The maintenance leader rolls the outcome events into rows of 1, 10 and 60 minute steps
(migration 00021); the store reads them back as :class:`StatsPoint` (one
step of a time series) and :class:`TypeStats` (one queue and job type over
a window). Durations are kept as histograms of :data:`HISTOGRAM_BUCKETS`
counts whose bucket ``b`` holds durations from ``2**(b/2)`` ms up to the next
bucket's start, so a percentile read from one (:meth:`Histogram.percentile`)
is the upper edge of the bucket it falls in: at most 1.41 times the true
value, never below it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

__all__ = [
    "HISTOGRAM_BUCKETS",
    "Histogram",
    "OutcomeCounts",
    "StatsPoint",
    "StatsWindow",
    "TypeStats",
    "bucket_upper_ms",
]

HISTOGRAM_BUCKETS = 48
"""Buckets of a duration histogram (the last one holds everything from 3.3 hours on)."""


def bucket_upper_ms(bucket: int) -> float:
    """Where bucket ``bucket`` ends, in milliseconds (the last one ends nowhere: infinity)."""
    if bucket >= HISTOGRAM_BUCKETS - 1:
        return math.inf
    return 2 ** ((bucket + 1) / 2)


@dataclass(frozen=True)
class Histogram:
    """Counts of durations per bucket (see the module's docstring for the buckets)."""

    counts: tuple[int, ...]

    @classmethod
    def of(cls, counts: Sequence[int] | None) -> Histogram:
        """A histogram of ``counts`` (None, or too short: the missing buckets are zero)."""
        values = list(counts or [])[:HISTOGRAM_BUCKETS]
        return cls(tuple(values + [0] * (HISTOGRAM_BUCKETS - len(values))))

    @classmethod
    def total_of(cls, histograms: Iterable[Histogram]) -> Histogram:
        """The bucket-by-bucket sum of ``histograms``."""
        sums = [0] * HISTOGRAM_BUCKETS
        for histogram in histograms:
            for i, n in enumerate(histogram.counts):
                sums[i] += n
        return cls(tuple(sums))

    @property
    def count(self) -> int:
        """How many durations the histogram holds."""
        return sum(self.counts)

    def percentile(self, p: float) -> timedelta | None:
        """The ``p``-th percentile (0 < p <= 100) as its bucket's upper edge; None when empty.

        The last bucket has no upper edge: a percentile falling in it is
        reported as that bucket's start (3.3 hours), a lower bound.
        """
        if not 0 < p <= 100:
            raise ValueError(f"a percentile is above 0 and at most 100, got {p}")
        total = self.count
        if total == 0:
            return None
        rank = math.ceil(total * p / 100)
        seen = 0
        for bucket, n in enumerate(self.counts):
            seen += n
            if seen >= rank:
                upper = bucket_upper_ms(bucket)
                if math.isinf(upper):
                    upper = 2 ** (bucket / 2)
                return timedelta(milliseconds=upper)
        raise AssertionError("unreachable: the rank is at most the total")


@dataclass(frozen=True)
class OutcomeCounts:
    """How the attempts of some jobs ended."""

    succeeded: int = 0
    """Attempts that succeeded."""
    failed: int = 0
    """Attempts that failed, or whose lease expired, and will be retried."""
    dead: int = 0
    """Attempts that failed with none left: the job ended dead."""
    cancelled: int = 0
    """Jobs cancelled (running, queued or waiting)."""

    @property
    def attempts(self) -> int:
        """Attempts that ran to an outcome: succeeded, failed or dead."""
        return self.succeeded + self.failed + self.dead

    @property
    def failure_rate(self) -> float | None:
        """The share of :attr:`attempts` that failed or ended dead; None without attempts."""
        return (self.failed + self.dead) / self.attempts if self.attempts else None

    def __add__(self, other: OutcomeCounts) -> OutcomeCounts:
        return OutcomeCounts(
            self.succeeded + other.succeeded,
            self.failed + other.failed,
            self.dead + other.dead,
            self.cancelled + other.cancelled,
        )


@dataclass(frozen=True)
class StatsPoint:
    """One step of a time series: the attempts that ended in it, and their durations."""

    at: datetime
    """The step's start."""
    outcomes: OutcomeCounts
    """How attempts ended in the step."""
    wait: Histogram
    """Queue wait (from due to claimed) of the attempts that ended a job in the step."""
    run: Histogram
    """Run time (from claimed to the recorded outcome) of those attempts."""


@dataclass(frozen=True)
class TypeStats:
    """One queue's jobs of one type over a window."""

    queue: str
    """The queue."""
    type: str
    """The job type."""
    outcomes: OutcomeCounts
    """How their attempts ended."""
    wait: Histogram
    """Their queue waits."""
    run: Histogram
    """Their run times."""

    @classmethod
    def merged(cls, rows: Sequence[TypeStats], *, queue: str, type: str) -> TypeStats:
        """``rows`` added together under one name (a queue's total, or everything's)."""
        total = OutcomeCounts()
        for row in rows:
            total = total + row.outcomes
        return cls(
            queue=queue,
            type=type,
            outcomes=total,
            wait=Histogram.total_of(row.wait for row in rows),
            run=Histogram.total_of(row.run for row in rows),
        )


class StatsWindow(StrEnum):
    """The spans a chart shows, each with the step of its points."""

    HOUR = "hour"
    DAY = "day"
    WEEK = "week"

    @property
    def span(self) -> timedelta:
        """How far back the window reaches."""
        return {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}[
            self.value
        ]

    @property
    def step(self) -> timedelta:
        """One point's width: a minute, ten minutes, an hour (60, 144 and 168 points)."""
        return {
            "hour": timedelta(minutes=1),
            "day": timedelta(minutes=10),
            "week": timedelta(hours=1),
        }[self.value]
