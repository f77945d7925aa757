"""Searching the jobs listing on a real server: id prefix and suffix, error text, payload
containment, the bound on the jobs one call examines, and its cursor."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest
from pydantic import ValidationError

from jobrun.domain import Job, JobFilter, JobState, NewJob, Outcome, OutcomeKind
from jobrun.postgres import Pool, Store

# Ids in the shape of UUIDv7 with recognisable digits; ordered as listed, oldest first.
A = UUID("0193ab00-0000-7000-8000-00000000aa01")
B = UUID("0193ab00-0000-7000-8000-00000000bb02")
C = UUID("0193ac00-0000-7000-8000-0000000c9f2c")
D = UUID("0193ad00-0000-7000-8000-0000000d9f2c")


@pytest.fixture
def store(pool: Pool) -> Store:
    return Store(pool)


async def dead(store: Store, job_id: UUID, error: str, **fields: Any) -> Job:
    """A job that failed its only attempt with ``error`` (the worker's own path)."""
    await store.enqueue(NewJob(id=job_id, type="t", max_attempts=1, **fields))
    (held,) = await store.claim(["default"], "w", 1, timedelta(minutes=1))
    assert held.id == job_id
    await store.record_outcomes("w", [Outcome(job=held, kind=OutcomeKind.FAIL, detail=error)])
    return await store.get(job_id)


async def ids(store: Store, **search: Any) -> list[UUID]:
    page = await store.list_jobs(JobFilter(**search), limit=10)
    assert not page.scan_cut and page.next_cursor is None
    return [job.id for job in page.jobs]


async def test_an_id_prefix_finds_the_jobs_whose_ids_start_with_it(store: Store) -> None:
    for job_id in (A, B, C, D):
        await store.enqueue(NewJob(id=job_id, type="t"))
    assert await ids(store, id_prefix="0193ab") == [B, A]
    assert await ids(store, id_prefix="0193AB00-0000-7000-8000-00000000AA") == [A]
    assert await ids(store, id_prefix=str(C)) == [C]
    assert await ids(store, id_prefix="0193ae") == []
    # A prefix reaching past a dash, typed with its dash or without.
    assert await ids(store, id_prefix="0193ac00-0") == [C]
    assert await ids(store, id_prefix="0193ac000") == [C]


async def test_an_id_suffix_finds_the_jobs_whose_ids_end_with_it(store: Store) -> None:
    for job_id in (A, B, C, D):
        await store.enqueue(NewJob(id=job_id, type="t"))
    assert await ids(store, id_suffix="9f2c") == [D, C]  # ambiguous: both listed
    assert await ids(store, id_suffix="D9F2C") == [D]
    assert await ids(store, id_suffix="8000-0000000d9f2c") == [D]
    assert await ids(store, id_suffix="00aa01") == [A]
    assert await ids(store, id_suffix="1234") == []
    assert await ids(store, id_prefix="0193ab", id_suffix="bb02") == [B]


@pytest.mark.parametrize("bad", ["xyz", "", "-", "0193ab0000007000800000000000aa011", "01 93"])
def test_an_id_part_that_is_not_hex_digits_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(ValidationError, match="id_suffix must be 1 to 32 hex digits"):
        JobFilter(id_suffix=bad)


async def test_error_text_matches_any_case_with_wildcards_taken_literally(store: Store) -> None:
    pct = await dead(store, A, "ValueError: 100% of quota used")
    under = await dead(store, B, "KeyError: 'user_id'")
    slash = await dead(store, C, r"path C:\temp\x not found")
    plain = await dead(store, D, "Timeout talking to 1000 users")
    await store.enqueue(NewJob(type="never-failed"))
    assert await ids(store, error="timeout") == [plain.id]
    assert await ids(store, error="TIMEOUT TALKING") == [plain.id]
    assert await ids(store, error="100%") == [pct.id]
    assert await ids(store, error="%") == [pct.id]
    assert await ids(store, error="user_id") == [under.id]
    assert await ids(store, error="_") == [under.id]  # not "any one character"
    assert await ids(store, error="\\temp\\") == [slash.id]
    assert await ids(store, error="\\") == [slash.id]
    assert await ids(store, error="error:") == [under.id, pct.id]
    assert await ids(store, error="nothing like it") == []
    # With the listing's filters: the dead tab (its own index) and a queue.
    assert await ids(store, error="error", state=JobState.DEAD) == [under.id, pct.id]
    assert await ids(store, error="error", state=JobState.QUEUED) == []
    assert await ids(store, error="error", queue="elsewhere") == []


async def test_payload_containment_nested_and_arrays(store: Store) -> None:
    one = await store.enqueue(NewJob(type="t", payload={"customer": 42, "tags": ["a", "b"]}))
    two = await store.enqueue(
        NewJob(type="t", payload={"customer": 7, "order": {"id": 9, "lines": [{"sku": "x"}]}})
    )
    three = await store.enqueue(NewJob(type="t", payload={"customer": "42"}))
    assert await ids(store, payload='{"customer": 42}') == [one.id]
    assert await ids(store, payload='{"customer": "42"}') == [three.id]
    assert await ids(store, payload='{"tags": ["b"]}') == [one.id]
    assert await ids(store, payload='{"tags": ["b", "c"]}') == []
    assert await ids(store, payload='{"order": {"id": 9}}') == [two.id]
    assert await ids(store, payload='{"order": {"lines": [{"sku": "x"}]}}') == [two.id]
    assert await ids(store, payload="{}") == [three.id, two.id, one.id]
    assert await ids(store, payload='{"customer": 42}', type="other") == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{customer: 42}", 'payload must be JSON, such as {"customer": 42}: Expecting property'),
        ('{"a": 1', "payload must be JSON"),
        ("", "payload must be JSON"),
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": "\\u0000"}', "payload is refused"),
    ],
)
def test_a_payload_that_is_not_json_is_refused_saying_why(text: str, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason.replace("{", r"\{").replace("}", r"\}")):
        JobFilter(payload=text)


async def test_a_search_examines_at_most_its_bound_and_its_cursor_continues(
    store: Store,
) -> None:
    jobs = [
        await store.enqueue(NewJob(type="t", payload={"n": n, "hit": n in (1, 6, 10)}))
        for n in range(12)
    ]
    newest_first = [j.id for j in reversed(jobs)]
    flt = JobFilter(payload='{"hit": true}')

    # Four jobs a call: the first walk meets jobs 11..8 and finds job 10.
    page = await store.list_jobs(flt, limit=10, search_rows=4)
    assert [j.id for j in page.jobs] == [jobs[10].id]
    assert page.scan_cut and page.next_cursor == newest_first[3]
    # The next walk (7..4) finds job 6, the third (3..0) job 1, and then the
    # walk ends short of its bound: nothing more to search.
    page = await store.list_jobs(flt, limit=10, cursor=page.next_cursor, search_rows=4)
    assert [j.id for j in page.jobs] == [jobs[6].id]
    assert page.scan_cut and page.next_cursor == newest_first[7]
    page = await store.list_jobs(flt, limit=10, cursor=page.next_cursor, search_rows=4)
    assert [j.id for j in page.jobs] == [jobs[1].id]
    assert page.scan_cut and page.next_cursor == newest_first[11]
    page = await store.list_jobs(flt, limit=10, cursor=page.next_cursor, search_rows=4)
    assert page.jobs == [] and not page.scan_cut and page.next_cursor is None

    # A page that fills before the bound pages on as a listing does.
    page = await store.list_jobs(flt, limit=1, search_rows=100)
    assert [j.id for j in page.jobs] == [jobs[10].id]
    assert not page.scan_cut and page.next_cursor == jobs[10].id
    page = await store.list_jobs(flt, limit=1, cursor=page.next_cursor, search_rows=100)
    assert [j.id for j in page.jobs] == [jobs[6].id] and not page.scan_cut
    # The bound's last job is examined too: a match there is on the page.
    page = await store.list_jobs(flt, limit=10, search_rows=2)
    assert [j.id for j in page.jobs] == [jobs[10].id]
    assert page.scan_cut and page.next_cursor == jobs[10].id


async def test_the_bound_within_a_dead_or_cancelled_tab_counts_only_that_state(
    store: Store,
) -> None:
    first = await dead(store, A, "boom one")
    for _ in range(5):
        await store.enqueue(NewJob(type="t", queue="other"))
    second = await dead(store, D, "boom two")
    flt = JobFilter(state=JobState.DEAD, error="boom")
    page = await store.list_jobs(flt, limit=10, search_rows=2)
    assert [j.id for j in page.jobs] == [second.id, first.id]
    assert page.scan_cut and page.next_cursor == first.id
    # Without the state, the same bound stops among the queued jobs.
    page = await store.list_jobs(JobFilter(error="boom"), limit=10, search_rows=2)
    assert page.jobs == [] and page.scan_cut


async def test_a_prefix_walk_stays_in_its_range_and_a_cursor_below_it_finds_nothing(
    store: Store,
) -> None:
    for job_id in (A, B, C, D):
        await store.enqueue(NewJob(id=job_id, type="t"))
    page = await store.list_jobs(JobFilter(id_prefix="0193ab"), limit=10, search_rows=2)
    # The whole range walked (two jobs), at the bound: it says so, honestly.
    assert [j.id for j in page.jobs] == [B, A] and page.scan_cut
    page = await store.list_jobs(
        JobFilter(id_prefix="0193ab"), limit=10, cursor=page.next_cursor, search_rows=2
    )
    assert page.jobs == [] and not page.scan_cut
    page = await store.list_jobs(JobFilter(id_prefix="0193ad"), limit=10, cursor=C)
    assert page.jobs == [] and not page.scan_cut
