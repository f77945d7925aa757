"""The test kit against a real database: captured callbacks commit, the recorder matches the store.

The recording producer is a test double; these tests are what keeps it
honest, by running the same enqueues through it and through the real store.
The plugin's fixtures are used here directly (jobrun's own conftest is built
on them) and from a separate pytest run through ``pytester``.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobrun.domain import Job, JobState, NewJob
from jobrun.errors import IdempotencyConflict, InvalidJob
from jobrun.postgres import Pool, Store, SyncProducer
from jobrun.registry import JobContext, Registry
from jobrun.testing import RecordingProducer, run_job


async def test_a_captured_commit_callback_commits_on_a_real_connection(jobrun_pool: Pool) -> None:
    reg = Registry()

    @reg.handler("note")
    async def note(ctx: JobContext, payload: Any) -> Any:
        async def commit(conn: Any) -> None:
            await conn.execute("INSERT INTO notes (text) VALUES (%s)", (payload["text"],))

        return commit

    async with jobrun_pool.connection() as conn:
        await conn.execute("CREATE TABLE notes (text text NOT NULL)")
    result = await run_job(reg, "note", {"text": "hello"})
    assert result.completed
    async with jobrun_pool.connection() as conn:
        assert await result.commit_with(conn) is True
        rows = await (await conn.execute("SELECT text FROM notes")).fetchall()
    assert rows == [("hello",)]


async def test_a_failing_callback_rolls_its_writes_back(jobrun_pool: Pool) -> None:
    reg = Registry()

    @reg.handler("half")
    async def half(ctx: JobContext, payload: Any) -> Any:
        async def commit(conn: Any) -> None:
            await conn.execute("INSERT INTO notes (text) VALUES ('first')")
            await conn.execute("INSERT INTO notes (text) VALUES (NULL)")

        return commit

    async with jobrun_pool.connection() as conn:
        await conn.execute("CREATE TABLE notes (text text NOT NULL)")
        result = await run_job(reg, "half")
        with pytest.raises(Exception, match="null value"):
            await result.commit_with(conn)
        rows = await (await conn.execute("SELECT count(*) FROM notes")).fetchone()
    assert rows == (0,)


def _shape(result: Job | IdempotencyConflict) -> Any:
    """What must agree between the store and the recorder (ids and clocks differ)."""
    if isinstance(result, IdempotencyConflict):
        return ("conflict", result.queue, result.key)
    return (
        result.type,
        result.queue,
        result.payload,
        result.state,
        result.attempts,
        result.priority,
        result.idempotency_key,
    )


BATCHES = [
    [NewJob(type="a", payload={"x": [1, 2], "y": None}, idempotency_key="k1")],
    [
        NewJob(type="a", payload={"y": None, "x": [1, 2]}, idempotency_key="k1"),  # replay
        NewJob(type="a", payload={"x": 3}, idempotency_key="k1"),  # conflict
        NewJob(type="a", payload={"x": 3}, idempotency_key="k1", queue="q2"),  # other queue
        NewJob(type="b", payload=[1, "two", 3.5, True]),
        NewJob(type="b", payload="text", priority=5),
        NewJob(type="c", payload={"n": 1}, idempotency_key="k2"),
        NewJob(type="c", payload={"n": 1}, idempotency_key="k2"),  # replay within the batch
    ],
    [NewJob(type="a", payload={"x": [1, 2], "y": None}, idempotency_key="k1", priority=1)],
]


async def test_the_recording_producer_answers_enqueues_as_the_store_does(
    jobrun_store: Store,
) -> None:
    recorder = RecordingProducer()
    for batch in BATCHES:
        real = await jobrun_store.enqueue_batch(batch)
        recorded = await recorder.enqueue_batch(batch)
        assert [_shape(r) for r in recorded] == [_shape(r) for r in real]
    job = NewJob(type="a", payload={"x": 9}, idempotency_key="k1")
    for producer in (jobrun_store, recorder):
        with pytest.raises(IdempotencyConflict):
            await producer.enqueue(job)
    bad = NewJob(type="a").model_copy(update={"priority": 10**6})
    for producer in (jobrun_store, recorder):
        with pytest.raises(InvalidJob, match="priority"):
            await producer.enqueue(bad)


async def test_the_recording_producer_enqueues_many_as_the_store_does(
    jobrun_store: Store,
) -> None:
    recorder = RecordingProducer()
    payloads = [{"n": 1}, None, [1, "two"]]
    for producer in (jobrun_store, recorder):
        ids = await producer.enqueue_many("a", payloads, queue="q", priority=3, max_attempts=2)
        made = [await producer.get(i) for i in ids]
        assert [_shape(j) for j in made] == [
            ("a", "q", p, JobState.QUEUED, 0, 3, None) for p in payloads
        ]
        assert {j.max_attempts for j in made} == {2}
        for bad, error in (([1, float("nan")], "payload 1"), ({"k": 1}, "not a dict")):
            with pytest.raises(InvalidJob, match=error):
                await producer.enqueue_many("a", bad)
    assert len(recorder.jobs) == 3


def test_the_sync_producer_fixture_enqueues_into_the_test_database(
    jobrun_sync_producer: SyncProducer,
) -> None:
    job = jobrun_sync_producer.enqueue(NewJob(type="t"))
    assert jobrun_sync_producer.get(job.id) == job


USER_TESTS = """
from jobrun import NewJob


async def test_store_enqueues(jobrun_store):
    job = await jobrun_store.enqueue(NewJob(type="t", idempotency_key="once"))
    assert (await jobrun_store.get(job.id)).type == "t"


async def test_each_test_gets_a_fresh_database(jobrun_store):
    job = await jobrun_store.enqueue(NewJob(type="t", idempotency_key="once"))
    page = await jobrun_store.list_jobs()
    assert [j.id for j in page.jobs] == [job.id]


def test_sync_fixtures(jobrun_database_url, jobrun_sync_producer, jobrun_template_database):
    assert jobrun_template_database not in jobrun_database_url
    jobrun_sync_producer.enqueue(NewJob(type="t"))
"""


def test_the_plugin_gives_a_users_tests_a_fresh_migrated_database(
    pytester: pytest.Pytester, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBRUN_TEST_DATABASE_URL", pg_admin_url)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_the_plugin_can_be_turned_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_it(jobrun_database_url):\n    pass\n")
    result = pytester.runpytest_subprocess("-q", "-p", "no:jobrun")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'jobrun_database_url' not found*"])
