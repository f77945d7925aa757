"""Outcomes whose text PostgreSQL refuses, or whose values it cannot store, against PostgreSQL.

A handler's exception message may hold a NUL or a lone surrogate, which a
text column refuses. The worker records a batch of outcomes in one
statement, so such a message used to fail the whole statement: the failing
job stayed leased until its lease ran out, and the jobs that succeeded
beside it were marked failed ("completion failed: UnicodeEncodeError"),
dead on their last attempt.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from jobrun import Cancel, Client, JobContext, NewJob, Registry
from jobrun.domain import Job, JobState, Outcome, OutcomeKind
from jobrun.postgres import Pool, Store

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
