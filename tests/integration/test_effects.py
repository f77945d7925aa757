"""Effect, the one-statement commit callback, on the async and the sync store.

The store batches the Effects of a completion group that share their SQL into
one executemany. These tests check that the batching keeps every guarantee of
a commit callback: each effect commits exactly once with its completion, an
effect whose job's effect already committed is skipped, a lost lease rolls its
effect back, and a failing statement costs only its own job.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import psycopg
import pytest
from tests.integration.test_store import LEASE, Stores, effect_rows, stores

from jobrun.domain import Effect, Job, JobState, NewJob, Outcome
from jobrun.errors import LeaseLost

__all__ = ["stores"]

INSERT = "INSERT INTO effect_rows (job_id, note) VALUES (%s, %s)"
INSERT_NAMED = "INSERT INTO effect_rows (job_id, note) VALUES (%(id)s, %(note)s)"


@pytest.fixture
async def effects_db(db_url: str) -> str:
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE effect_rows (job_id uuid NOT NULL UNIQUE, note text)")
    return db_url


def notes(db_url: str) -> dict[UUID, str]:
    with psycopg.connect(db_url) as conn:
        return dict(conn.execute("SELECT job_id, note FROM effect_rows").fetchall())


async def claimed_jobs(store: Any, n: int, **job: Any) -> list[Job]:
    await store.enqueue_batch([NewJob(type="t", payload={"i": i}, **job) for i in range(n)])
    jobs: list[Job] = await store.claim([job.get("queue", "default")], "w1", n, LEASE)
    assert len(jobs) == n
    return jobs


async def test_a_group_of_effects_commits_each_once_with_its_completion(
    stores: Stores, effects_db: str
) -> None:
    store = await stores.make()
    jobs = await claimed_jobs(store, 50)
    outcomes = [
        Outcome(job=j, commit=Effect(INSERT, (j.id, "positional")))
        if i % 2
        else Outcome(job=j, commit=Effect(INSERT_NAMED, {"id": j.id, "note": "named"}))
        for i, j in enumerate(jobs)
    ]
    results = await store.record_outcomes("w1", outcomes)
    assert all(isinstance(r, Job) and r.state is JobState.SUCCEEDED for r in results)
    written = notes(effects_db)
    assert written == {j.id: "positional" if i % 2 else "named" for i, j in enumerate(jobs)}
    assert all(o.invocations == 1 for o in outcomes)


async def test_effects_and_function_callbacks_share_one_group(
    stores: Stores, effects_db: str
) -> None:
    store = await stores.make()
    jobs = await claimed_jobs(store, 6)

    def function_callback(job: Job) -> Any:
        def run(conn: Any) -> Any:
            return conn.execute(INSERT, (job.id, "function"))

        return run

    outcomes = [
        Outcome(job=j, commit=Effect(INSERT, (j.id, "effect")) if i < 3 else function_callback(j))
        for i, j in enumerate(jobs)
    ]
    results = await store.record_outcomes("w1", outcomes)
    assert all(isinstance(r, Job) for r in results)
    assert sorted(notes(effects_db).values()) == ["effect"] * 3 + ["function"] * 3


async def test_a_failing_effect_costs_only_its_own_job(stores: Stores, effects_db: str) -> None:
    store = await stores.make()
    jobs = await claimed_jobs(store, 5)
    outcomes = [Outcome(job=j, commit=Effect(INSERT, (j.id, "ok"))) for j in jobs]
    # The same SQL text, so it travels in the same executemany: its unique
    # violation fails the whole batch, and the store then completes each job
    # in a transaction of its own.
    outcomes[3] = Outcome(job=jobs[3], commit=Effect(INSERT, (jobs[1].id, "duplicate")))
    results = await store.record_outcomes("w1", outcomes)
    assert isinstance(results[3], psycopg.errors.UniqueViolation)
    assert all(isinstance(r, Job) for i, r in enumerate(results) if i != 3)
    assert notes(effects_db) == {j.id: "ok" for i, j in enumerate(jobs) if i != 3}
    assert (await store.get(jobs[3].id)).state is JobState.LEASED  # its attempt fails later


async def test_an_effect_of_a_lost_lease_is_not_written(stores: Stores, effects_db: str) -> None:
    store = await stores.make()
    jobs = await claimed_jobs(store, 3)
    with psycopg.connect(effects_db, autocommit=True) as conn:
        conn.execute("UPDATE jobs SET lease_owner = 'thief' WHERE id = %s", (jobs[0].id,))
    outcomes = [Outcome(job=j, commit=Effect(INSERT, (j.id, "ok"))) for j in jobs]
    results = await store.record_outcomes("w1", outcomes)
    assert isinstance(results[0], LeaseLost)
    assert sorted(effect_rows(effects_db)) == sorted(j.id for j in jobs[1:])


async def test_an_effect_whose_job_already_committed_it_is_not_run_again(
    stores: Stores, effects_db: str
) -> None:
    store = await stores.make()
    jobs = await claimed_jobs(store, 3)
    scope, key = await store.effect_key(jobs[1])
    # The effect of the middle job committed on an earlier attempt (its
    # ledger row is there): its Effect is left out of the batch.
    with psycopg.connect(effects_db, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO processed_effects (scope, key, job_id) VALUES (%s, %s, %s)",
            (scope, key, jobs[1].id),
        )
    outcomes = [Outcome(job=j, commit=Effect(INSERT, (j.id, "ok"))) for j in jobs]
    results = await store.record_outcomes("w1", outcomes)
    assert all(isinstance(r, Job) and r.state is JobState.SUCCEEDED for r in results)
    assert sorted(effect_rows(effects_db)) == sorted([jobs[0].id, jobs[2].id])
    assert [o.invocations for o in outcomes] == [1, 0, 1]


async def test_an_effect_called_directly_runs_its_statement(effects_db: str) -> None:
    # Anything that runs commit callbacks (the test kit's run_job, a caller's
    # own code) can call an Effect like any other callback.
    job_id = UUID(int=7)
    async with await psycopg.AsyncConnection.connect(effects_db) as conn:
        await Effect(INSERT, (job_id, "direct"))(conn)
        await conn.commit()
    assert notes(effects_db) == {job_id: "direct"}
