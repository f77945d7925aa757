"""Text from handlers that PostgreSQL refuses, and outcomes it cannot store, against PostgreSQL.

A handler's exception message or progress message may hold a NUL or a lone
surrogate, which a text column refuses. The worker writes many jobs' reports
in one statement, so such a message used to fail the whole statement. An
outcome's failed statement left the failing job leased until its lease ran
out and failed the jobs that succeeded beside it ("completion failed:
UnicodeEncodeError"), dead on their last attempt. A progress message failed
every heartbeat of the worker, so none of its jobs' leases was extended.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from jobrun import Cancel, Client, Config, JobContext, NewJob, Registry
from jobrun.domain import Job, JobState, Outcome, OutcomeKind
from jobrun.postgres import Pool, Store
from jobrun.testing import eventually

LEASE = timedelta(minutes=5)


def registry() -> Registry:
    handlers = Registry()

    @handlers.handler("ok")
    async def ok(ctx: JobContext, payload: Any) -> None:
        return None

    @handlers.handler("nul")
    async def nul(ctx: JobContext, payload: Any) -> None:
        raise ValueError("before\x00after")

    @handlers.handler("surrogate")
    async def surrogate(ctx: JobContext, payload: Any) -> None:
        raise ValueError("bytes \udcff from argv")

    @handlers.handler("cancel")
    async def cancel(ctx: JobContext, payload: Any) -> None:
        raise Cancel("no\x00 \ud800 reason")

    return handlers


async def test_a_message_a_text_column_refuses_is_recorded_escaped_and_spares_the_batch(
    db_url: str,
) -> None:
    types = ["ok", "nul", "ok", "surrogate", "ok", "cancel", "ok"]
    async with Client(database_url=db_url, registry=registry()) as client:
        made = await client.enqueue_batch([NewJob(type=t, max_attempts=1) for t in types])
        await client.run_worker(drain=True)
        ended = [await client.store.get(job.id) for job in made if isinstance(job, Job)]
    states = [job.state for job in ended]
    assert states == [
        JobState.SUCCEEDED,
        JobState.DEAD,
        JobState.SUCCEEDED,
        JobState.DEAD,
        JobState.SUCCEEDED,
        JobState.CANCELLED,
        JobState.SUCCEEDED,
    ]
    assert (ended[1].last_error or "").endswith("ValueError: before\\x00after")
    assert (ended[3].last_error or "").endswith("ValueError: bytes \\udcff from argv")
    assert ended[5].last_error == "no\\x00 \\ud800 reason"


async def test_one_outcome_the_statement_cannot_store_fails_alone(pool: Pool) -> None:
    # Past the outcome's own checks (a dataclass the worker builds), a snooze
    # far beyond any timestamp fails the statement; recorded one by one, only
    # its job gets the error and its neighbours are recorded.
    store = Store(pool)
    await store.enqueue_batch([NewJob(type="t", payload={"n": n}) for n in range(3)])
    first, bad, last = sorted(await store.claim(["default"], "w", 3, LEASE), key=_n)
    results = await store.record_outcomes(
        "w",
        [
            Outcome(job=first),
            Outcome(job=bad, kind=OutcomeKind.SNOOZE, delay=timedelta(days=999_999_999)),
            Outcome(job=last),
        ],
    )
    assert isinstance(results[0], Job) and results[0].state is JobState.SUCCEEDED
    assert isinstance(results[1], Exception) and not isinstance(results[1], Job)
    assert isinstance(results[2], Job) and results[2].state is JobState.SUCCEEDED
    assert (await store.get(bad.id)).state is JobState.LEASED  # untouched, its lease runs on


def _n(job: Job) -> int:
    return int(job.payload["n"])  # type: ignore[index,call-overload]


async def test_a_progress_message_a_text_column_refuses_keeps_the_heartbeats_going(
    db_url: str,
) -> None:
    release = asyncio.Event()
    handlers = Registry()

    @handlers.handler("report")
    async def report(ctx: JobContext, payload: Any) -> None:
        # A payload cannot carry a NUL (it is refused at enqueue); a handler
        # can still make one, from a file name or a reply, say.
        ctx.progress(0.5, "a\x00b" if payload["odd"] else "plain")
        await release.wait()

    config = Config(
        database_url=db_url, lease=timedelta(seconds=30), heartbeat_every=timedelta(seconds=1)
    )
    async with Client(handlers, config) as client:
        odd = await client.enqueue(NewJob(type="report", payload={"odd": True}))
        plain = await client.enqueue(NewJob(type="report", payload={"odd": False}))
        worker = asyncio.create_task(client.run_worker(drain=True))
        try:
            # Both reports reach the database: the heartbeat that carries them
            # succeeded, for the job with the odd message and for its neighbour.
            shown = await eventually(
                lambda: _both_reported(client.store, [odd.id, plain.id]),
                what="both jobs' progress written by a heartbeat",
            )
            assert [shown[odd.id].message, shown[plain.id].message] == ["a\\x00b", "plain"]
        finally:
            release.set()
            await worker
        assert (await client.store.get(odd.id)).state is JobState.SUCCEEDED


async def _both_reported(store: Store, ids: list[Any]) -> Any:
    shown = await store.progress_of(ids)
    return shown if len(shown) == 2 else None


async def test_a_result_jsonb_refuses_fails_its_job_naming_the_place_in_the_result(
    db_url: str,
) -> None:
    handlers = Registry()

    @handlers.handler("answer")
    async def answer(ctx: JobContext, payload: Any) -> dict[str, Any]:
        return {"rows": [{"name": "a\x00b"}]}

    async with Client(handlers, database_url=db_url) as client:
        job = await client.enqueue(NewJob(type="answer", max_attempts=1))
        await client.run_worker(drain=True)
        ended = await client.store.get(job.id)
    assert ended.state is JobState.DEAD
    assert (ended.last_error or "").endswith(
        "result of job type 'answer' is refused: "
        'result["rows"][0]["name"] must not contain a NUL character'
    )
