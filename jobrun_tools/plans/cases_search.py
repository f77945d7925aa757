"""The cases of ``db/query/search.sql`` (see :mod:`jobrun_tools.plans.cases`).

Every search case walks the newest 50,000 jobs at most (the store's default
bound, :data:`jobrun.domain.SEARCH_ROWS`): the plan must be a LIMIT over a
backward range scan of an index, and the executed ``rows removed`` rule of
the query proves the bound held on a database twenty times its size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

from jobrun.domain import SEARCH_ROWS, id_range, payload_search
from jobrun.sqlc import search
from jobrun.sqlc.models import JobState
from jobrun_tools.plans.capture import recording
from jobrun_tools.plans.cases import Case, Facts, Given

__all__ = ["cases"]


def _common(prefix: str | None = None, cursor: UUID | None = None, **given: Any) -> dict[str, Any]:
    low, high = id_range(prefix, cursor)
    values: dict[str, Any] = {
        "queue": None,
        "type": None,
        "created_after": None,
        "created_before": None,
        "id_suffix": None,
        "error": None,
        "payload_json": None,
        "low": low,
        "high": high,
        "max_walk": SEARCH_ROWS,
        "max_jobs": 51,
    }
    values.update(given)
    return values


def _walk(q: search.Querier, params: dict[str, Any]) -> Callable[[Given], object]:
    return lambda g: q.job_search(params=search.JobSearchParams(**params))


def _walk_state(q: search.Querier, params: dict[str, Any]) -> Callable[[Given], object]:
    return lambda g: q.job_search_in_state(params=search.JobSearchInStateParams(**params))


def cases(f: Facts) -> dict[str, list[Case]]:
    """The cases of every query of search.sql."""
    q = search.Querier(recording())
    fact = f.jobs
    walks = {
        # The scale database's ids are 01900000-0000-7000-8000-<row number>.
        "prefix": (
            "ids starting 01900000000070008000000000ff (a range of 256)",
            _common("01900000000070008000000000ff", state=None),
        ),
        "error": (
            "a piece of the last error, in every state, first page",
            _common(error="refused", state=None),
        ),
        "payload": (
            "payload containment no recent job has, first page",
            _common(payload_json=payload_search('{"n": 12345}'), state=None),
        ),
        "suffix-next": (
            "an id suffix, from the newest page's cursor",
            _common(cursor=fact.page_cursor, id_suffix="0abc", state=None),
        ),
        "queued-error": (
            "error text among queued jobs (no index in id order: the state is a filter)",
            _common(error="refused", state=JobState.QUEUED),
        ),
    }
    in_state = {
        "dead-error": (
            "error text among dead jobs",
            _common(error="refused", state=JobState.DEAD),
        ),
        "cancelled-payload": (
            "payload containment among cancelled jobs",
            _common(payload_json='{"to": "nobody"}', state=JobState.CANCELLED),
        ),
        "dead-suffix-next": (
            "an id suffix among dead jobs, from the second page's cursor",
            _common(cursor=fact.dead_cursor, id_suffix="0abc", state=JobState.DEAD),
        ),
    }
    return {
        "JobSearch": [
            Case(label, about, _walk(q, params)) for label, (about, params) in walks.items()
        ],
        "JobSearchInState": [
            Case(label, about, _walk_state(q, params))
            for label, (about, params) in in_state.items()
        ],
    }
