"""The parameters each query is planned with: its cases.

A case is a label (what a ``-- plan(<label>): ...`` rule names), a line
saying what it asks, and a call of the query's generated method with the
store's own types, as the store would make it; :mod:`jobrun_tools.plans.capture`
turns the call into the statement and parameters to EXPLAIN. The values come
from the scale database (:class:`Facts`: the first dead job, the newest
page's cursor, ...), so they find what the store's calls would find. A case
may first change the database (``setup``: claim a batch, so the heartbeat
has leases to extend); it runs in the same transaction as the EXPLAIN, which
is rolled back.

Every query of ``db/query`` and of the detector needs at least one case;
the report stops, naming the query, when one has none. Queries PostgreSQL
cannot EXPLAIN (``COPY``, ``ANALYZE``) need none: their file says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from jobrun_tools.plans.build import DETECTOR_NOW_MS
from jobrun_tools.sqlc.scale import ScaleFactsRow
from jobrun_tools.sqlc.scale_detector import ScaleDetectorFactsRow

__all__ = ["Case", "Facts", "Given", "Setup", "all_cases"]

Given = Mapping[str, Any]
"""What a case's setup hands its call (ids it leased, ...); empty without a setup."""

Setup = Callable[[psycopg.Connection[Any]], Given]


@dataclass(frozen=True, slots=True)
class Facts:
    """What the cases read from the scale database once it is built."""

    now: datetime
    """The database clock the build started from."""
    jobs: ScaleFactsRow
    detector: ScaleDetectorFactsRow

    @property
    def now_ms(self) -> int:
        """The detector's clock in the scale database, in its unit (epoch milliseconds)."""
        return DETECTOR_NOW_MS


@dataclass(frozen=True, slots=True)
class Case:
    """One way a query is called, planned and checked."""

    label: str
    about: str
    call: Callable[[Given], object]
    setup: Setup | None = None
    executes: bool = True
    """False when running the statement must fail (the case then is only planned)."""


def all_cases(facts: Facts) -> dict[str, dict[str, list[Case]]]:
    """Every case, by query set name (``jobrun``, ``detector``), then by query name."""
    from jobrun_tools.plans import (
        cases_detector,
        cases_jobs,
        cases_other,
        cases_search,
        cases_stats,
    )

    jobrun = {
        **cases_jobs.cases(facts),
        **cases_other.cases(facts),
        **cases_search.cases(facts),
        **cases_stats.cases(facts),
    }
    return {"jobrun": jobrun, "detector": cases_detector.cases(facts)}
