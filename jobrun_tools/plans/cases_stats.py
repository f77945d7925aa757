"""The cases of stats.sql, the charts' roll-up and reads (see :mod:`jobrun_tools.plans.cases`)."""

from __future__ import annotations

from datetime import timedelta

from jobrun.sqlc import stats
from jobrun_tools.plans.capture import recording
from jobrun_tools.plans.cases import Case, Facts

__all__ = ["cases"]


def cases(f: Facts) -> dict[str, list[Case]]:
    """The cases of every query of stats.sql, on a week of per-minute rows."""
    st = stats.Querier(recording())
    cursor = f.jobs.stats_cursor
    return {
        "StatsEventHorizon": [
            Case("now", "the newest event id", lambda g: st.stats_event_horizon())
        ],
        "StatsSnapshot": [Case("now", "the current snapshot", lambda g: st.stats_snapshot())],
        "StatsSettled": [
            Case(
                "settled",
                "a snapshot with no transaction running",
                lambda g: st.stats_settled(snapshot="1000:1000:"),
            )
        ],
        "StatsRollUp": [
            Case(
                "batch",
                "one batch of 10,000 event ids after the cursor",
                lambda g: st.stats_roll_up(after=cursor, upto=cursor + 100_000, max_events=10_000),
            ),
            Case(
                "moved",
                "a cursor another leader moved: nothing folded",
                lambda g: st.stats_roll_up(after=cursor - 1, upto=cursor + 100, max_events=10_000),
            ),
        ],
        "StatsCursor": [Case("one", "the cursor's row", lambda g: st.stats_cursor())],
        "StatsUnfoldedSince": [
            Case(
                "behind",
                "the first event after a cursor 100,000 events short",
                lambda g: st.stats_unfolded_since(),
            )
        ],
        "StatsSeries": [
            Case(
                "hour",
                "the last hour of every queue, a point a minute",
                lambda g: st.stats_series(
                    width=1,
                    since=f.now - timedelta(hours=1),
                    queue=None,
                    type=None,
                ),
            ),
            Case(
                "week-queue",
                "a week of one queue, a point an hour",
                lambda g: st.stats_series(
                    width=60,
                    since=f.now - timedelta(days=7),
                    queue="emails",
                    type=None,
                ),
            ),
        ],
        "StatsBreakdown": [
            Case(
                "day",
                "each queue and type over a day of ten-minute steps",
                lambda g: st.stats_breakdown(width=10, since=f.now - timedelta(days=1), queue=None),
            )
        ],
        "StatsOutcomesPerQueue": [
            Case(
                "hour",
                "the overview's last hour per queue",
                lambda g: st.stats_outcomes_per_queue(since=f.now - timedelta(hours=1)),
            )
        ],
        "StatsParkedPerQueue": [
            Case(
                "all",
                "the waiting, dead and cancelled jobs per queue",
                lambda g: st.stats_parked_per_queue(),
            )
        ],
        "StatsPrune": [
            Case(
                "old",
                "hours older than 8 days (none: the fill holds what retention keeps)",
                lambda g: st.stats_prune(width=60, age=timedelta(days=8), batch_size=5000),
            )
        ],
    }
