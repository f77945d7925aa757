"""What the Charts page and ``/api/stats`` show, shaped from the store's rolled-up rows.

The rows come from the database (:class:`jobrun.ports.StatsReader`), so
every dashboard process shows the same numbers and a restarted one shows the
past. Steps with no outcome are filled with zeros here, so a chart's x axis
always covers its whole window; the newest step is the one still filling
(the roll-up trails by up to :data:`jobrun.rollup.DEFAULT_ROLLUP_EVERY`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobrun.domain import Histogram, OutcomeCounts, StatsPoint, StatsWindow, TypeStats
from jobrun.ports import StatsReader

__all__ = [
    "CONSISTENT_READS",
    "LAGGING_AFTER",
    "PERCENTILES",
    "StatsView",
    "first_step",
    "per_minute_points",
    "stats_view",
]

PERCENTILES = (50, 95, 99)
"""The percentiles of queue wait and run time the tables show."""

CONSISTENT_READS = 3
"""How many times a view reads its series and totals, at most, to find them agreeing."""

LAGGING_AFTER = timedelta(minutes=1)
"""How old the oldest event not yet rolled up may be before the charts say they lag:
six turns of the roll-up. A maintenance leader with charts on falls that far behind
only while a transaction that wrote job events stays open (it waits for those)."""

_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)  # the origin the store's steps are aligned to


def first_step(now: datetime, window: StatsWindow) -> datetime:
    """The start of the oldest step of ``window`` ending with the step holding ``now``."""
    step = window.step
    current = _EPOCH + ((now - _EPOCH) // step) * step
    return current - (window.span - step)


@dataclass(frozen=True)
class StatsView:
    """A window's series (one point per step, zeros filled in) and its totals."""

    window: StatsWindow
    queue: str | None
    steps: list[datetime]
    points: list[StatsPoint]
    by_type: list[TypeStats]
    now: datetime
    """The database's time when the view was read."""
    unfolded_since: datetime | None = None
    """When the oldest event not yet rolled up was written; None when none is left."""

    @property
    def lagging_since(self) -> datetime | None:
        """Since when the charts miss outcomes, when that is over :data:`LAGGING_AFTER` ago:
        no worker is rolling them up (none runs maintenance, or ``charts`` is off), or the
        roll-up waits for a transaction that wrote job events and is still open."""
        since = self.unfolded_since
        if since is not None and self.now - since > LAGGING_AFTER:
            return since
        return None

    @property
    def by_queue(self) -> list[TypeStats]:
        """Each queue's total over the window (``type`` empty)."""
        queues = sorted({row.queue for row in self.by_type})
        return [
            TypeStats.merged([r for r in self.by_type if r.queue == q], queue=q, type="")
            for q in queues
        ]

    @property
    def total(self) -> TypeStats:
        """Everything shown, together."""
        return TypeStats.merged(self.by_type, queue=self.queue or "", type="")

    def percentile_series(self, which: str, p: float) -> list[float | None]:
        """Per step, the ``p``-th percentile of ``which`` (``wait`` or ``run``) in seconds."""
        out: list[float | None] = []
        for point in self.points:
            value = getattr(point, which).percentile(p)
            out.append(value.total_seconds() if value is not None else None)
        return out

    def failure_rates(self) -> list[float | None]:
        """Per step, the share of attempts that failed or ended dead, in percent."""
        return [
            rate * 100 if (rate := point.outcomes.failure_rate) is not None else None
            for point in self.points
        ]

    def as_json(self) -> dict[str, Any]:
        """The view as plain JSON: the window, each step's counts and percentiles, the totals."""

        def percentiles(histogram: Histogram) -> dict[str, float | None]:
            return {
                f"p{p}": (v.total_seconds() if (v := histogram.percentile(p)) else None)
                for p in PERCENTILES
            }

        def row(stats: TypeStats) -> dict[str, Any]:
            return {
                "queue": stats.queue,
                "type": stats.type,
                **_counts(stats.outcomes),
                "failure_rate": stats.outcomes.failure_rate,
                "wait_seconds": percentiles(stats.wait),
                "run_seconds": percentiles(stats.run),
            }

        return {
            "window": self.window.value,
            "step_seconds": self.window.step.total_seconds(),
            "queue": self.queue,
            "lagging_since": lagging.isoformat() if (lagging := self.lagging_since) else None,
            "points": [
                {
                    "at": point.at.isoformat(),
                    **_counts(point.outcomes),
                    "wait_seconds": percentiles(point.wait),
                    "run_seconds": percentiles(point.run),
                }
                for point in self.points
            ],
            "by_queue": [row(r) for r in self.by_queue],
            "by_type": [row(r) for r in self.by_type],
        }


def _counts(outcomes: OutcomeCounts) -> dict[str, int]:
    return {
        "succeeded": outcomes.succeeded,
        "failed": outcomes.failed,
        "dead": outcomes.dead,
        "cancelled": outcomes.cancelled,
    }


async def stats_view(
    store: StatsReader, now: datetime, window: StatsWindow, queue: str | None
) -> StatsView:
    """The ``window`` ending now, of ``queue`` or of every queue."""
    start = first_step(now, window)
    count = int(window.span / window.step)
    steps = [start + i * window.step for i in range(count)]
    # The series and the totals are two statements. A fold landing between them
    # would show totals the series lacks, so the series is read again after the
    # totals, and both again when it moved (folds are seconds apart).
    for _ in range(CONSISTENT_READS):
        series = await store.stats_series(start, window.step, queue=queue)
        by_type = await store.stats_by_type(start, window.step, queue=queue)
        if await store.stats_series(start, window.step, queue=queue) == series:
            break
    found = {p.at: p for p in series}
    empty = Histogram.of(None)
    points = [
        found.get(at) or StatsPoint(at=at, outcomes=OutcomeCounts(), wait=empty, run=empty)
        for at in steps
    ]
    return StatsView(
        window=window,
        queue=queue,
        steps=steps,
        points=points,
        by_type=by_type,
        now=now,
        unfolded_since=await store.stats_unfolded_since(),
    )


def per_minute_points(minutes: dict[datetime, int], now: datetime, count: int = 60) -> list[int]:
    """The last ``count`` minutes' values, oldest first, zeros where a minute had none."""
    current = now.replace(second=0, microsecond=0)
    return [minutes.get(current - timedelta(minutes=count - 1 - i), 0) for i in range(count)]
