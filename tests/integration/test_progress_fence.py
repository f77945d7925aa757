"""Progress reports go through the lease fence, and readers see only the running attempt's."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobrun.domain import NewJob
from jobrun.postgres import Pool, Store
from jobrun.registry import JobContext

LEASE = timedelta(minutes=5)


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def test_a_report_is_written_only_for_a_lease_the_owner_holds(store: Store) -> None:
    job = await store.enqueue(NewJob(type="t"))
    (held,) = await store.claim(["default"], "w1", 1, LEASE)
    assert held.id == job.id
    kept = await store.heartbeat("w2", [held], LEASE, progress=[(held, 0.9, "not mine")])
    assert kept == set()
    assert await store.progress_of([job.id]) == {}
    await store.heartbeat("w1", [held], LEASE, progress=[(held, 0.4, "mine")])
    assert (await store.progress_of([job.id]))[job.id].describe() == "40% mine"
    await store.heartbeat("w1", [held], LEASE, progress=[(held, 0.6, "")])
    assert (await store.progress_of([job.id]))[job.id].describe() == "60%"


async def test_a_report_of_an_earlier_attempt_is_not_shown_for_the_next(store: Store) -> None:
    await store.enqueue(NewJob(type="t"))
    (first,) = await store.claim(["default"], "w1", 1, LEASE)
    await store.heartbeat("w1", [first], LEASE, progress=[(first, 0.5, "first attempt")])
    await store.release(first, "w1", "handed back")
    (second,) = await store.claim(["default"], "w2", 1, LEASE)
    assert second.id == first.id
    assert await store.progress_of([second.id]) == {}
    assert await store.prune_progress_batch() == 1


@pytest.mark.parametrize(
    ("fraction", "message", "problem"),
    [
        (1.5, "", "from 0 to 1"),
        (-0.1, "", "from 0 to 1"),
        (float("nan"), "", "from 0 to 1"),
        (True, "", "from 0 to 1"),
        ("half", "", "from 0 to 1"),
        (0.5, "x" * 201, "at most 200 characters"),
        (0.5, 7, "must be a string"),
    ],
)
def test_a_bad_report_is_refused_naming_what_is_wrong(
    fraction: object, message: object, problem: str
) -> None:
    ctx = JobContext.__new__(JobContext)
    ctx.reported = None
    with pytest.raises(ValueError, match=problem):
        ctx.progress(fraction, message)  # type: ignore[arg-type]
    assert ctx.reported is None
