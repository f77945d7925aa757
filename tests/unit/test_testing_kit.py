"""The test kit users import (jobrun.testing), without a database.

run_job must report what the worker would do with the same handler; the
recording producer must validate and replay keys as the real store does (its
parity with the store on a real database is in tests/integration).
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from jobrun.domain import Job, JobState, NewJob, OutcomeKind, Result
from jobrun.errors import IdempotencyConflict, InvalidJob, JobNotFound, UnknownJobType
from jobrun.registry import Cancel, CancellationToken, InvalidPayload, JobContext, Registry, Snooze
from jobrun.testing import (
    HandlerTimedOut,
    RecordingProducer,
    SyncRecordingProducer,
    eventually,
    make_job,
    run_job,
    run_job_sync,
)


class Welcome(BaseModel):
    user_id: int


def registry_with_handlers() -> Registry:
    reg = Registry()

    @reg.handler("welcome", payload=Welcome)
    async def welcome(ctx: JobContext, payload: Welcome) -> Any:
        async def commit(conn: Any) -> None:
            await conn.execute("-- user %s", (payload.user_id,))

        return commit

    @reg.handler("sync.echo")
    def echo(ctx: JobContext, payload: Any) -> None:
        ctx.logger.info("echo %s on %s", payload, threading.current_thread().name)
        return None

    @reg.handler("boom")
    async def boom(ctx: JobContext, payload: Any) -> None:
        raise ValueError("boom")

    @reg.handler("cancel")
    def cancel(ctx: JobContext, payload: Any) -> None:
        raise Cancel("not wanted")

    @reg.handler("snooze")
    async def snooze(ctx: JobContext, payload: Any) -> None:
        raise Snooze(timedelta(minutes=5))

    @reg.handler("bad.return")
    async def bad_return(ctx: JobContext, payload: Any) -> Any:
        return {1, 2}

    return reg


# -- make_job -------------------------------------------------------------------------


def test_make_job_looks_claimed_by_default() -> None:
    job = make_job()
    assert job.state is JobState.LEASED
    assert job.attempts == 1
    assert job.lease_owner and job.lease_expires_at is not None
    assert job.lease_expires_at > job.run_at
    assert job.payload == {}
    assert job.run_at.tzinfo is UTC


def test_make_job_applies_overrides_and_validates_them() -> None:
    job = make_job(type="mail", payload={"to": (1, 2)}, attempts=3, queue="q")
    assert (job.type, job.attempts, job.queue) == ("mail", 3, "q")
    assert job.payload == {"to": [1, 2]}, "payloads are the JSON the database hands back"
    with pytest.raises(ValueError, match="attempts"):
        make_job(attempts="many")


def test_make_job_from_a_new_job_keeps_its_fields() -> None:
    new = NewJob(type="mail", payload={"a": 1}, queue="q", priority=-3, idempotency_key="k")
    job = make_job(new)
    assert (job.id, job.type, job.payload, job.queue, job.priority, job.idempotency_key) == (
        new.id,
        "mail",
        {"a": 1},
        "q",
        -3,
        "k",
    )


def test_make_job_of_a_queued_or_finished_state_has_no_lease() -> None:
    queued = make_job(state=JobState.QUEUED)
    assert (queued.attempts, queued.lease_owner, queued.lease_expires_at) == (0, None, None)
    dead = make_job(state="dead")
    assert dead.finished_at is not None and dead.lease_owner is None


# -- run_job ----------------------------------------------------------------------------


async def test_run_job_validates_the_payload_and_captures_the_commit_callback() -> None:
    result = await run_job(registry_with_handlers(), "welcome", {"user_id": "7"})
    assert result.completed and result.kind is OutcomeKind.COMPLETE
    assert result.payload == Welcome(user_id=7)
    assert callable(result.commit)
    assert result.error is None


async def test_run_job_gives_back_what_the_handler_returned_as_a_client_would_read_it() -> None:
    reg = Registry()

    class Size(BaseModel):
        width: int

    @reg.handler("measure", result=Size)
    async def measure(ctx: JobContext, payload: Any) -> Any:
        return Result({"width": "12"}, commit=None)

    @reg.handler("nothing")
    async def nothing(ctx: JobContext, payload: Any) -> None:
        return None

    measured = await run_job(reg, "measure")
    assert (measured.kind, measured.result) == (OutcomeKind.COMPLETE, {"width": 12})
    assert (await run_job(reg, "nothing")).result is None


async def test_run_job_takes_a_model_instance_as_a_producer_would() -> None:
    result = await run_job(registry_with_handlers(), "welcome", Welcome(user_id=7))
    assert result.completed
    assert result.job.payload == {"user_id": 7}


async def test_a_payload_that_does_not_validate_fails_the_attempt_as_in_the_worker() -> None:
    result = await run_job(registry_with_handlers(), "welcome", {"user_id": "seven"})
    assert result.failed
    assert isinstance(result.error, InvalidPayload)
    assert "user_id" in result.detail
    assert result.job.payload == {"user_id": "seven"}
    with pytest.raises(InvalidPayload):
        result.raise_for_failure()


async def test_a_sync_handler_runs_in_a_thread_with_a_real_context(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="jobrun.handler")
    result = await run_job(registry_with_handlers(), "sync.echo", [1, 2], attempt=2)
    assert result.completed and result.commit is None
    assert result.job.attempts == 2
    (record,) = caplog.records
    assert "jobrun-testing" in record.getMessage()
    assert record.attempt == 2  # type: ignore[attr-defined]


def test_run_job_sync_runs_outside_an_event_loop() -> None:
    result = run_job_sync(registry_with_handlers(), "sync.echo", {"x": 1})
    assert result.completed


@pytest.mark.parametrize(
    ("job_type", "kind", "check"),
    [
        ("boom", OutcomeKind.FAIL, lambda r: r.detail == "ValueError: boom"),
        ("cancel", OutcomeKind.CANCEL, lambda r: r.detail == "not wanted"),
        ("snooze", OutcomeKind.SNOOZE, lambda r: r.delay == timedelta(minutes=5)),
        ("bad.return", OutcomeKind.FAIL, lambda r: "is not valid JSON" in r.detail),
        ("nobody.handles.this", OutcomeKind.FAIL, lambda r: isinstance(r.error, UnknownJobType)),
    ],
)
async def test_how_the_handler_ends_is_the_outcome_the_worker_would_report(
    job_type: str, kind: OutcomeKind, check: Any
) -> None:
    result = await run_job(registry_with_handlers(), job_type)
    assert result.kind is kind
    assert check(result), result


async def test_an_async_handler_past_its_timeout_sees_the_token_and_is_cancelled() -> None:
    reg = Registry()
    seen: list[bool] = []

    @reg.handler("slow", timeout=0.05)
    async def slow(ctx: JobContext, payload: Any) -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            seen.append(ctx.cancelled)
            raise

    result = await run_job(reg, "slow")
    assert result.failed
    assert isinstance(result.error, HandlerTimedOut) and isinstance(result.error, TimeoutError)
    assert seen == [True]


async def test_a_sync_handler_past_its_timeout_is_asked_through_its_token() -> None:
    reg = Registry()

    woken: list[bool] = []

    @reg.handler("slow.sync")
    def slow(ctx: JobContext, payload: Any) -> None:
        woken.append(ctx.token.wait(5))
        assert woken[-1], "the token was never set"

    result = await run_job(reg, "slow.sync", timeout=timedelta(milliseconds=50))
    assert result.failed and isinstance(result.error, HandlerTimedOut)
    # The thread's wait ended because the token was set, not after its 5 s.
    await eventually(lambda: woken, what="the handler's wait ending")
    assert woken == [True]


async def test_a_token_given_by_the_test_reaches_the_handler() -> None:
    reg = Registry()

    @reg.handler("watch")
    def watch(ctx: JobContext, payload: Any) -> None:
        if ctx.cancelled:
            raise Cancel(ctx.token.reason or "")

    token = CancellationToken()
    token.set("operator")
    result = await run_job(reg, "watch", token=token)
    assert result.cancelled and result.detail == "operator"


async def test_run_job_accepts_a_job_or_a_new_job() -> None:
    reg = registry_with_handlers()
    job = make_job(type="welcome", payload={"user_id": 1}, attempts=4)
    assert (await run_job(reg, job)).job is job
    assert (await run_job(reg, job, attempt=5)).job.attempts == 5
    new = NewJob(type="welcome", payload={"user_id": 2})
    result = await run_job(reg, new)
    assert result.completed and result.job.id == new.id
    with pytest.raises(TypeError, match="inside the Job"):
        await run_job(reg, job, {"user_id": 3})


async def test_commit_with_refuses_a_job_that_did_not_complete() -> None:
    result = await run_job(registry_with_handlers(), "boom")
    with pytest.raises(AssertionError, match="did not complete"):
        await result.commit_with(object())


async def test_commit_with_and_no_callback_runs_nothing() -> None:
    result = await run_job(registry_with_handlers(), "sync.echo")
    assert await result.commit_with(object()) is False


# -- the recording producer -----------------------------------------------------------


async def test_recording_producer_records_jobs_as_the_store_returns_them() -> None:
    producer = RecordingProducer()
    job = await producer.enqueue(NewJob(type="mail", payload={"to": [1]}, delay=timedelta(hours=1)))
    assert job.state is JobState.QUEUED and job.attempts == 0
    assert job.payload == {"to": [1]}
    assert job.run_at - job.created_at == timedelta(hours=1)
    assert await producer.get(job.id) == job
    assert producer.jobs == [job]
    with pytest.raises(JobNotFound):
        await producer.get(make_job().id)


async def test_recording_producer_replays_and_conflicts_on_idempotency_keys() -> None:
    producer = RecordingProducer()
    first = await producer.enqueue(NewJob(type="t", payload={"a": 1, "b": 2}, idempotency_key="k"))
    again = await producer.enqueue(NewJob(type="t", payload={"b": 2, "a": 1}, idempotency_key="k"))
    assert again == first, "a replay returns the stored job, whose id differs from the offered"
    with pytest.raises(IdempotencyConflict):
        await producer.enqueue(NewJob(type="t", payload={"a": 2}, idempotency_key="k"))
    other_queue = await producer.enqueue(
        NewJob(type="t", payload={"a": 9}, idempotency_key="k", queue="other")
    )
    assert other_queue.id != first.id, "keys are unique per queue"
    results = await producer.enqueue_batch(
        [
            NewJob(type="t", payload={"a": 1, "b": 2}, idempotency_key="k"),
            NewJob(type="t", payload={"a": 3}, idempotency_key="k"),
            NewJob(type="t"),
        ]
    )
    assert results[0] == first
    assert isinstance(results[1], IdempotencyConflict)
    assert isinstance(results[2], Job)
    assert len(producer.jobs) == 3
    assert len(producer.offered) == 7


async def test_recording_producer_validates_the_whole_batch_before_recording() -> None:
    producer = RecordingProducer(payload_models={"mail": Welcome}, max_payload_bytes=100)
    with pytest.raises(InvalidJob, match="Welcome"):
        await producer.enqueue_batch([NewJob(type="other"), NewJob(type="mail", payload={})])
    with pytest.raises(InvalidJob, match="100-byte"):
        await producer.enqueue(NewJob(type="other", payload={"x": "y" * 200}))
    assert producer.jobs == []
    stored = await producer.enqueue(NewJob(type="mail", payload={"user_id": "3"}))
    assert stored.payload == {"user_id": 3}, "the model's dump is stored, as in the store"


async def test_recording_producer_takes_a_registry_and_validates_through_its_models() -> None:
    # Issue 27, item 15: RecordingProducer(registry) raised TypeError.
    registry = registry_with_handlers()
    producer = RecordingProducer(registry)
    with pytest.raises(InvalidJob, match="does not match Welcome"):
        await producer.enqueue(NewJob(type="welcome", payload={"user_id": "seven"}))
    stored = await producer.enqueue(NewJob(type="welcome", payload={"user_id": "7"}))
    assert stored.payload == {"user_id": 7}, "the model's dump is stored, as by a Client"
    with SyncRecordingProducer(registry, max_payload_bytes=100) as sync_producer:
        with pytest.raises(InvalidJob, match="does not match Welcome"):
            sync_producer.enqueue(NewJob(type="welcome", payload={}))
        assert sync_producer.payload_models == {"welcome": Welcome}
    with pytest.raises(TypeError, match="expected a jobrun Registry"):
        RecordingProducer({"welcome": Welcome})  # type: ignore[arg-type]


async def test_recording_producer_with_a_registry_refuses_types_it_does_not_register() -> None:
    # As a Client holding the registry does (issue 27, item 10).
    producer = RecordingProducer(registry_with_handlers())
    with pytest.raises(InvalidJob, match=r"'welcom' is not registered.*'welcome'"):
        await producer.enqueue(NewJob(type="welcom", payload={"user_id": 7}))
    with pytest.raises(InvalidJob, match="'welcom' is not registered"):
        await producer.enqueue_many("welcom", [{"user_id": 7}])
    assert producer.jobs == []
    assert (await RecordingProducer().enqueue(NewJob(type="welcom"))).type == "welcom"


async def test_recording_producer_refuses_an_id_already_stored_as_the_store_does() -> None:
    producer = RecordingProducer()
    stored = await producer.enqueue(NewJob(type="t"))
    again = NewJob(type="t", id=stored.id)
    with pytest.raises(InvalidJob, match=f"same id is already stored: {stored.id}"):
        await producer.enqueue(again)
    with pytest.raises(InvalidJob, match="same id is already stored"):
        await producer.enqueue_batch([NewJob(type="t"), again])
    twin = NewJob(type="t")
    with pytest.raises(InvalidJob, match="same id is already stored"):
        await producer.enqueue_batch([twin, twin])
    assert producer.jobs == [stored], "a refused batch records none of its jobs"
    assert producer.offered == [NewJob(type="t", id=stored.id)]


async def test_recording_producer_enqueues_many_alike_and_checks_them_first() -> None:
    producer = RecordingProducer(payload_models={"mail": Welcome})
    ids = await producer.enqueue_many("mail", [{"user_id": "1"}, {"user_id": 2}], queue="mail")
    assert [(await producer.get(i)).payload for i in ids] == [{"user_id": 1}, {"user_id": 2}]
    assert [j.queue for j in producer.jobs] == ["mail", "mail"]
    assert [j.id for j in producer.offered] == ids
    with pytest.raises(InvalidJob, match="payload 1 of job type 'mail' does not match Welcome"):
        await producer.enqueue_many("mail", [{"user_id": 3}, {}])
    assert len(producer.jobs) == 2, "nothing of a refused call is recorded"


async def test_recording_producer_uses_its_clock() -> None:
    pinned = datetime(2030, 1, 1, tzinfo=UTC)
    producer = RecordingProducer(clock=lambda: pinned)
    job = await producer.enqueue(NewJob(type="t"))
    assert await producer.now() == pinned == job.created_at == job.run_at


async def test_assert_enqueued_matches_type_payload_and_fields() -> None:
    producer = RecordingProducer()
    await producer.enqueue(NewJob(type="mail", payload={"user_id": 7}, queue="mail"))
    await producer.enqueue(NewJob(type="mail", payload={"user_id": 8}, queue="mail"))
    job = producer.assert_enqueued("mail", payload=Welcome(user_id=8), queue="mail")
    assert job.payload == {"user_id": 8}
    assert producer.assert_enqueued("mail", count=2).payload == {"user_id": 8}
    producer.assert_not_enqueued("sms")
    producer.assert_not_enqueued("mail", payload={"user_id": 9})
    with pytest.raises(AssertionError, match=r"no job with type='mail', payload=\{'user_id': 9\}"):
        producer.assert_enqueued("mail", payload={"user_id": 9})
    with pytest.raises(AssertionError, match=r"2 jobs .* expected 1"):
        producer.assert_enqueued("mail", count=1)
    with pytest.raises(AssertionError, match="expected none"):
        producer.assert_not_enqueued()
    with pytest.raises(TypeError, match="colour"):
        producer.assert_enqueued("mail", colour="red")
    producer.clear()
    producer.assert_not_enqueued()


def test_sync_recording_producer_is_the_same_without_await() -> None:
    with SyncRecordingProducer() as producer:
        first = producer.enqueue(NewJob(type="t", idempotency_key="k"))
        assert producer.enqueue(NewJob(type="t", idempotency_key="k")) == first
        (conflict,) = producer.enqueue_batch([NewJob(type="t", payload=1, idempotency_key="k")])
        assert isinstance(conflict, IdempotencyConflict)
        assert producer.get(first.id) == first
        assert producer.now().tzinfo is UTC
        producer.assert_enqueued("t", count=1)
        ids = producer.enqueue_many("bulk", [{"n": 1}, {"n": 2}], delay=timedelta(minutes=5))
        assert [producer.get(i).payload for i in ids] == [{"n": 1}, {"n": 2}]
        producer.assert_enqueued("bulk", payload={"n": 2})
