"""Groups, chains and workflow reads against PostgreSQL, run by a real worker:
a group's callback runs once after its parts and reads each one's outcome and
result (from an async and from a sync handler); a failed step of a chain
cancels the rest; the store reads a workflow back from any of its jobs."""

from __future__ import annotations

import threading
from typing import Any
from uuid import UUID

import pytest

from jobrun import Client, JobContext, NewJob, Registry, chain, group
from jobrun.domain import Dependency, JobState
from jobrun.errors import JobNotFound
from jobrun.postgres import Pool, Store
from jobrun.testing import run_job


def registry_with_parts(seen: list[list[Dependency]]) -> Registry:
    registry = Registry()

    @registry.handler("part")
    async def part(ctx: JobContext, payload: Any) -> Any:
        if payload.get("fail"):
            raise RuntimeError(f"part {payload['n']} failed")
        return {"n": payload["n"], "square": payload["n"] ** 2}

    @registry.handler("report")
    async def report(ctx: JobContext, payload: Any) -> Any:
        found = await ctx.dependencies()
        seen.append(found)
        return sum(d.result["square"] for d in found if d.succeeded)

    @registry.handler("report.sync")
    def report_sync(ctx: JobContext, payload: Any) -> Any:
        assert threading.current_thread() is not threading.main_thread()
        found = ctx.dependencies_sync()
        seen.append(found)
        return len(found)

    return registry


@pytest.mark.parametrize("callback", ["report", "report.sync"])
async def test_a_groups_callback_runs_once_after_its_parts_and_reads_each_outcome(
    db_url: str, callback: str
) -> None:
    seen: list[list[Dependency]] = []
    registry = registry_with_parts(seen)
    parts = [
        NewJob(type="part", payload={"n": n, "fail": n == 3}, max_attempts=1) for n in range(5)
    ]
    jobs = group(parts, then=NewJob(type=callback, priority=-5))
    async with Client(registry, database_url=db_url, concurrency=4) as client:
        made = await client.enqueue_batch(jobs)
        assert [m.state for m in made] == [JobState.QUEUED] * 5 + [JobState.WAITING]
        await client.run_worker(drain=True)
        then = await client.store.get(jobs[-1].id)
        assert then.state is JobState.SUCCEEDED
        value = await client.result(then.id)
    assert len(seen) == 1  # once
    (found,) = seen
    by_id = {d.job_id: d for d in found}
    assert set(by_id) == {p.id for p in parts}
    failed = by_id[parts[3].id]
    assert (failed.state, failed.type, failed.attempts) == (JobState.DEAD, "part", 1)
    assert failed.result is None and "part 3 failed" in (failed.error or "")
    assert by_id[parts[4].id].result == {"n": 4, "square": 16}
    assert all(d.if_failed == "run" for d in found)
    assert value == (0 + 1 + 4 + 16 if callback == "report" else 5)


async def test_a_failed_step_of_a_chain_cancels_the_steps_after_it(db_url: str) -> None:
    seen: list[list[Dependency]] = []
    registry = registry_with_parts(seen)
    steps = chain(
        [
            NewJob(type="part", payload={"n": 1}),
            NewJob(type="part", payload={"n": 2, "fail": True}, max_attempts=1),
            NewJob(type="part", payload={"n": 3}),
            NewJob(type="part", payload={"n": 4}),
        ]
    )
    async with Client(registry, database_url=db_url) as client:
        await client.enqueue_batch(steps)
        await client.run_worker(drain=True)
        ended = [(await client.store.get(s.id)).state for s in steps]
        assert ended == [JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.CANCELLED]
        # ... and the steps ran in order: each waited for the one before it.
        deps = await client.store.dependencies_of(steps[1].id, with_results=True)
        assert [(d.job_id, d.result) for d in deps] == [(steps[0].id, {"n": 1, "square": 1})]


async def test_the_store_reads_a_workflow_back_from_any_of_its_jobs(pool: Pool) -> None:
    store = Store(pool)
    top = NewJob(type="start")
    left = NewJob(type="left", depends_on=[top.id])
    right = NewJob(type="right", depends_on=[top.id])
    jobs = [top, left, right, NewJob(type="join", depends_on=[left.id, right.id])]
    await store.enqueue_batch(jobs)
    unrelated = await store.enqueue(NewJob(type="alone"))
    for start in jobs:
        workflow = await store.workflow(start.id)
        assert workflow.steps[0].job_id == start.id
        assert {s.job_id for s in workflow.steps} == {j.id for j in jobs}
        assert workflow.complete
    levels = [[s.type for s in level] for level in workflow.levels()]
    assert levels == [["start"], ["left", "right"], ["join"]]
    assert len(workflow.edges) == 4
    assert workflow.counts() == {"queued": 1, "waiting": 3}
    cut = await store.workflow(top.id, max_steps=2)
    assert not cut.complete and len(cut.steps) == 2 and cut.steps[0].job_id == top.id
    # A job with nothing linked is a workflow of one step, complete.
    alone = await store.workflow(unrelated.id)
    assert [s.job_id for s in alone.steps] == [unrelated.id] and alone.complete
    assert (await store.workflow(unrelated.id, max_steps=1)).complete
    assert not (await store.workflow(left.id, max_steps=1)).complete
    with pytest.raises(JobNotFound):
        await store.workflow(UUID(int=7))
    # A purged step still appears, as purged, when its edges remain.
    await store.delete_jobs([top.id])
    kept = await store.workflow(left.id)
    assert {s.job_id for s in kept.steps} == {j.id for j in jobs}
    assert {s.job_id: s.state for s in kept.steps}[top.id] is None
    assert kept.counts() == {"purged": 1, "waiting": 3}


async def test_run_job_hands_the_handler_the_dependencies_it_is_given() -> None:
    seen: list[list[Dependency]] = []
    registry = registry_with_parts(seen)
    given = [
        Dependency(
            job_id=UUID(int=1), state=JobState.SUCCEEDED, if_failed="run", result={"square": 9}
        ),
        Dependency(job_id=UUID(int=2), state=JobState.DEAD, if_failed="run", error="boom"),
    ]
    result = await run_job(registry, "report", {}, dependencies=given)
    assert result.result == 9 and seen == [given]
    none = await run_job(registry, "report", {})
    assert none.result == 0 and seen[-1] == []
