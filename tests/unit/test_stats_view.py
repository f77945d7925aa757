"""The Charts view reads its series and its totals so that they agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from jobrun.domain import Histogram, OutcomeCounts, StatsPoint, StatsWindow, TypeStats
from jobrun.web.stats_view import CONSISTENT_READS, stats_view

NOW = datetime(2026, 12, 4, 22, 30, 15, tzinfo=UTC)
EMPTY = Histogram.of(None)


class FoldsBetweenReads:
    """A reader whose roll-up folds 30 outcomes right after the ``fold_after``-th series read."""

    def __init__(self, fold_after: int) -> None:
        self.fold_after = fold_after
        self.series_reads = 0
        self.folded = 0

    async def stats_series(
        self, since: datetime, step: timedelta, *, queue: str | None = None, type: str | None = None
    ) -> list[StatsPoint]:
        self.series_reads += 1
        counts = OutcomeCounts(self.folded)
        last = since + 59 * step
        points = (
            [StatsPoint(at=last, outcomes=counts, wait=EMPTY, run=EMPTY)] if self.folded else []
        )
        if self.series_reads == self.fold_after:
            self.folded += 30
        return points

    async def stats_by_type(
        self, since: datetime, step: timedelta, *, queue: str | None = None
    ) -> list[TypeStats]:
        counts = OutcomeCounts(self.folded)
        return [TypeStats(queue="q", type="t", outcomes=counts, wait=EMPTY, run=EMPTY)]

    async def stats_unfolded_since(self) -> datetime | None:
        return None


async def test_a_fold_between_the_series_and_the_totals_is_read_again() -> None:
    reader = FoldsBetweenReads(fold_after=1)
    view = await stats_view(reader, NOW, StatsWindow.HOUR, None)  # type: ignore[arg-type]
    assert sum(p.outcomes.succeeded for p in view.points) == 30
    assert view.total.outcomes.succeeded == 30
    assert reader.series_reads == 4  # the first pair disagreed; the second agreed


async def test_without_a_fold_the_series_is_read_twice_and_the_totals_once() -> None:
    reader = FoldsBetweenReads(fold_after=0)
    view = await stats_view(reader, NOW, StatsWindow.HOUR, None)  # type: ignore[arg-type]
    assert view.total.outcomes.succeeded == 0
    assert reader.series_reads == 2


async def test_a_view_gives_up_agreeing_after_its_reads_and_shows_the_last() -> None:
    class FoldsAlways(FoldsBetweenReads):
        async def stats_by_type(
            self, since: datetime, step: timedelta, *, queue: str | None = None
        ) -> list[TypeStats]:
            self.folded += 30
            return await super().stats_by_type(since, step, queue=queue)

    reader = FoldsAlways(fold_after=0)
    view = await stats_view(reader, NOW, StatsWindow.HOUR, None)  # type: ignore[arg-type]
    assert reader.series_reads == 2 * CONSISTENT_READS
    assert view.total.outcomes.succeeded == 30 * CONSISTENT_READS
