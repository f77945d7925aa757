"""The executor on its own: one claimed job in, one Outcome out, no worker and no store."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from jobrun.domain import Job, Outcome, OutcomeKind, Result
from jobrun.errors import (
    HandlerTimedOut,
    InvalidPayload,
    InvalidResult,
    JobrunError,
    UnknownJobType,
)
from jobrun.registry import Cancel, JobContext, Registry, Snooze
from jobrun.telemetry.hooks import current_job
from jobrun.testing import make_job
from jobrun.unrunnable import UnrunnableRetry
from jobrun.worker.attempt import STOP_CANCELLED, STOP_SHUTDOWN, Attempt
from jobrun.worker.executor import JobExecutor


async def execute(executor: JobExecutor, run: Attempt) -> Outcome | None:
    """Run the attempt as the worker does: the executor as the attempt's own task."""
    run.task = asyncio.get_running_loop().create_task(executor.execute(run))
    return await run.task


async def outcome_of(reg: Registry, job: Job, **kw: Any) -> tuple[Outcome, Attempt]:
    executor = JobExecutor(reg, **kw)
    run = executor.attempt(job)
    try:
        outcome = await execute(executor, run)
    finally:
        executor.shutdown()
    assert outcome is not None
    return outcome, run


async def test_a_handler_that_returns_nothing_completes_its_job() -> None:
    reg = Registry()
    seen: list[Job | None] = []

    @reg.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        seen.append(current_job.get())

    job = make_job(type="noop")
    outcome, _ = await outcome_of(reg, job)
    assert (outcome.kind, outcome.job, outcome.commit, outcome.lock_keys) == (
        OutcomeKind.COMPLETE,
        job,
        None,
        (),
    )
    assert seen == [job]  # the job's log context is set while its handler runs
    assert current_job.get() is None  # and only in the attempt's own task


async def test_a_commit_callback_is_returned_with_the_keys_it_locks() -> None:
    reg = Registry()

    async def commit(conn: Any) -> None:
        return None

    @reg.handler("write")
    async def write(ctx: JobContext, payload: Any) -> Any:
        ctx.lock("site:1")
        return commit

    outcome, _ = await outcome_of(reg, make_job(type="write"))
    assert outcome.kind is OutcomeKind.COMPLETE
    assert outcome.commit is commit and outcome.lock_keys == ("site:1",)


async def test_a_return_value_that_is_not_json_fails_the_attempt() -> None:
    reg = Registry()

    @reg.handler("odd")
    async def odd(ctx: JobContext, payload: Any) -> Any:
        return {1, 2}

    outcome, run = await outcome_of(reg, make_job(type="odd"))
    assert outcome.kind is OutcomeKind.FAIL
    assert outcome.detail == (
        "result of job type 'odd' is not valid JSON: Object of type set is not JSON serializable"
    )
    assert isinstance(run.error, ValueError) and run.reason == outcome.detail
    assert outcome.result is None


class Thumbnail(BaseModel):
    width: int
    url: str


@pytest.mark.parametrize(
    ("returned", "text"),
    [
        ({"rows": 12, "name": "é"}, '{"rows":12,"name":"é"}'),
        ([1, 2.5, None, True], "[1,2.5,null,true]"),
        ("done", '"done"'),
        (0, "0"),
        (Thumbnail(width=3, url="/a"), '{"width":3,"url":"/a"}'),
    ],
)
async def test_a_returned_value_is_the_completions_result_as_json(returned: Any, text: str) -> None:
    reg = Registry()

    @reg.handler("make")
    async def make(ctx: JobContext, payload: Any) -> Any:
        return returned

    outcome, _ = await outcome_of(reg, make_job(type="make"))
    assert (outcome.kind, outcome.commit, outcome.result) == (OutcomeKind.COMPLETE, None, text)


async def test_a_result_and_a_commit_callback_travel_together() -> None:
    reg = Registry()

    async def commit(conn: Any) -> None:
        return None

    @reg.handler("both")
    def both(ctx: JobContext, payload: Any) -> Any:  # a sync handler, on a thread
        ctx.lock("k")
        return Result({"ok": True}, commit=commit)

    outcome, _ = await outcome_of(reg, make_job(type="both"))
    assert (outcome.kind, outcome.commit, outcome.result, outcome.lock_keys) == (
        OutcomeKind.COMPLETE,
        commit,
        '{"ok":true}',
        ("k",),
    )


async def test_a_declared_result_type_validates_and_dumps_what_the_handler_returns() -> None:
    reg = Registry()

    @reg.handler("thumb", result=Thumbnail)
    async def thumb(ctx: JobContext, payload: Any) -> Any:
        return {"width": "7", "url": "/b"} if payload else {"width": "wide"}

    good, _ = await outcome_of(reg, make_job(type="thumb", payload=1))
    assert good.result == '{"width":7,"url":"/b"}'
    bad, run = await outcome_of(reg, make_job(type="thumb", payload=0))
    assert bad.kind is OutcomeKind.FAIL and bad.result is None
    assert bad.detail.startswith("result of 'thumb' does not match its declared type: width:")
    assert isinstance(run.error, InvalidResult)
    assert "url: Field required" in bad.detail


async def test_a_result_over_the_limit_fails_the_attempt_naming_sizes() -> None:
    reg = Registry()

    @reg.handler("big")
    async def big(ctx: JobContext, payload: Any) -> Any:
        return "x" * payload

    fits, _ = await outcome_of(reg, make_job(type="big", payload=98), max_result_bytes=100)
    assert fits.kind is OutcomeKind.COMPLETE and fits.result is not None
    assert len(fits.result) == 100
    over, _ = await outcome_of(reg, make_job(type="big", payload=99), max_result_bytes=100)
    assert over.kind is OutcomeKind.FAIL and over.result is None
    assert over.detail == "result of job type 'big' is 101 bytes, over the 100-byte limit"


async def test_a_result_jsonb_cannot_hold_fails_the_attempt() -> None:
    reg = Registry()

    @reg.handler("nul")
    async def nul(ctx: JobContext, payload: Any) -> Any:
        return {"text": "a\x00b"}

    outcome, _ = await outcome_of(reg, make_job(type="nul"))
    assert outcome.kind is OutcomeKind.FAIL
    assert outcome.detail.startswith("result of job type 'nul' is refused:")


async def test_an_exception_fails_with_its_traceback_and_a_one_line_reason() -> None:
    reg = Registry()

    @reg.handler("boom")
    async def boom(ctx: JobContext, payload: Any) -> None:
        raise ValueError("kaboom\non two lines")

    outcome, run = await outcome_of(reg, make_job(type="boom"))
    assert outcome.kind is OutcomeKind.FAIL
    assert outcome.detail.startswith("Traceback")
    assert "ValueError: kaboom" in outcome.detail
    assert run.reason == "ValueError: kaboom on two lines"
    assert isinstance(run.error, ValueError)


async def test_a_jobrun_error_fails_with_its_message_alone() -> None:
    reg = Registry()

    @reg.handler("refuse")
    async def refuse(ctx: JobContext, payload: Any) -> None:
        raise JobrunError("not today")

    outcome, run = await outcome_of(reg, make_job(type="refuse"))
    assert (outcome.kind, outcome.detail, run.reason) == (OutcomeKind.FAIL, "not today", "")


async def test_cancel_and_snooze_are_outcomes_of_their_own() -> None:
    reg = Registry()

    @reg.handler("cancel")
    async def cancel(ctx: JobContext, payload: Any) -> None:
        raise Cancel("not wanted")

    @reg.handler("snooze")
    def snooze(ctx: JobContext, payload: Any) -> None:
        raise Snooze(timedelta(minutes=5))

    cancelled, _ = await outcome_of(reg, make_job(type="cancel"))
    assert (cancelled.kind, cancelled.detail) == (OutcomeKind.CANCEL, "not wanted")
    snoozed, _ = await outcome_of(reg, make_job(type="snooze"))
    assert (snoozed.kind, snoozed.delay) == (OutcomeKind.SNOOZE, timedelta(minutes=5))


async def test_an_unknown_type_fails_on_the_unrunnable_policy_without_running_anything() -> None:
    policy = UnrunnableRetry(attempts=2, retry=timedelta(minutes=1))
    outcome, run = await outcome_of(Registry(), make_job(type="nobody"), unrunnable=policy)
    assert outcome.kind is OutcomeKind.FAIL
    assert outcome.detail.startswith(
        "no handler is registered for job type 'nobody' (this worker cannot run the job: "
        "attempt 1 of at most 2,"
    ), outcome.detail
    assert (outcome.delay, outcome.max_attempts) == (timedelta(minutes=1), 2)
    assert isinstance(run.error, UnknownJobType) and run.payload is None and run.reason == ""


async def test_the_payload_is_validated_into_the_handlers_type_or_fails_unrun() -> None:
    reg = Registry()
    got: list[Any] = []

    class Email(BaseModel):
        to: str

    @reg.handler("email", payload=Email)
    async def email(ctx: JobContext, payload: Email) -> None:
        got.append(payload)

    outcome, run = await outcome_of(reg, make_job(type="email", payload={"to": "a@b"}))
    assert outcome.kind is OutcomeKind.COMPLETE and got == [Email(to="a@b")]
    assert run.payload == Email(to="a@b")
    bad, bad_run = await outcome_of(reg, make_job(type="email", payload={"too": "x"}))
    assert bad.kind is OutcomeKind.FAIL and "to: Field required" in bad.detail
    assert "this worker cannot run the job" in bad.detail
    assert isinstance(bad_run.error, InvalidPayload) and len(got) == 1


async def test_a_sync_handler_runs_on_a_named_daemon_thread_in_the_jobs_context() -> None:
    reg = Registry()
    seen: list[tuple[str, bool, Job | None]] = []

    @reg.handler("sync")
    def sync(ctx: JobContext, payload: Any) -> None:
        thread = threading.current_thread()
        seen.append((thread.name, thread.daemon, current_job.get()))

    job = make_job(type="sync")
    outcome, run = await outcome_of(reg, job, threads=1, thread_name_prefix="test-exec")
    assert outcome.kind is OutcomeKind.COMPLETE
    assert seen == [("test-exec-0", True, job)]
    assert run.thread is not None and run.thread.done()


@pytest.mark.parametrize(
    ("handler_timeout", "job_timeout", "override", "expected"),
    [
        (None, None, None, None),
        (None, 2.0, None, 2.0),
        (1.0, 2.0, None, 1.0),
        (1.0, 2.0, 3.0, 3.0),
    ],
)
def test_an_attempts_limit_is_the_override_else_the_handlers_else_the_executors(
    handler_timeout: float | None,
    job_timeout: float | None,
    override: float | None,
    expected: float | None,
) -> None:
    reg = Registry()

    @reg.handler("t", timeout=handler_timeout)
    async def t(ctx: JobContext, payload: Any) -> None:
        return None

    def seconds(value: float | None) -> timedelta | None:
        return None if value is None else timedelta(seconds=value)

    executor = JobExecutor(reg, job_timeout=seconds(job_timeout))
    run = executor.attempt(make_job(type="t"), timeout=seconds(override))
    assert run.timeout == seconds(expected)


async def test_a_timeout_sets_the_token_before_it_cancels_an_async_handler() -> None:
    reg = Registry()
    seen: list[bool] = []

    @reg.handler("slow", timeout=0.05)
    async def slow(ctx: JobContext, payload: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(ctx.cancelled)
            raise

    outcome, run = await outcome_of(reg, make_job(type="slow"))
    assert (outcome.kind, outcome.detail) == (
        OutcomeKind.FAIL,
        "timed out: the attempt exceeded 0.05s",
    )
    assert isinstance(run.error, HandlerTimedOut) and seen == [True]


async def test_a_timed_out_handler_that_swallows_the_cancel_still_times_out() -> None:
    reg = Registry()

    @reg.handler("stubborn")
    async def stubborn(ctx: JobContext, payload: Any) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return None

    outcome, _ = await outcome_of(
        reg, make_job(type="stubborn"), job_timeout=timedelta(seconds=0.05)
    )
    assert outcome.detail == "timed out: the attempt exceeded 0.05s"


async def test_a_sync_handler_past_its_timeout_is_told_through_its_token() -> None:
    reg = Registry()

    @reg.handler("spin", timeout=0.05)
    def spin(ctx: JobContext, payload: Any) -> None:
        assert ctx.token.wait(10), "the token was never set"

    outcome, run = await outcome_of(reg, make_job(type="spin"))
    assert outcome.kind is OutcomeKind.FAIL and isinstance(run.error, HandlerTimedOut)
    assert run.ctx.token.reason == "timeout"


async def run_until_stopped(reason: str) -> tuple[Outcome | None, list[str]]:
    reg = Registry()
    started = asyncio.Event()
    seen: list[str] = []

    @reg.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen.append(ctx.token.reason or "")
            raise

    executor = JobExecutor(reg)
    run = executor.attempt(make_job(type="long"))
    run.task = asyncio.get_running_loop().create_task(executor.execute(run))
    await started.wait()
    run.stop(reason)
    return await run.task, seen


async def test_a_stop_for_shutdown_hands_the_job_back() -> None:
    outcome, seen = await run_until_stopped(STOP_SHUTDOWN)
    assert outcome is not None and outcome.kind is OutcomeKind.RELEASE
    assert outcome.detail == "handed back: the worker shut down before the job finished"
    assert seen == ["shutdown"]


async def test_a_stop_for_a_cancel_or_lost_lease_fails_the_attempt() -> None:
    outcome, seen = await run_until_stopped(STOP_CANCELLED)
    assert outcome is not None and outcome.kind is OutcomeKind.FAIL
    assert outcome.detail == "stopped: the job was cancelled or its lease was lost"
    assert seen == ["cancelled"]


async def test_an_attempt_stopped_before_it_began_never_runs_its_handler() -> None:
    reg = Registry()
    ran: list[str] = []

    @reg.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        ran.append("ran")

    executor = JobExecutor(reg)
    run = executor.attempt(make_job(type="noop"))
    run.task = asyncio.get_running_loop().create_task(executor.execute(run))
    run.stop(STOP_SHUTDOWN)  # before the task's first step: nothing to cancel yet
    outcome = await run.task
    assert outcome is not None and outcome.kind is OutcomeKind.RELEASE and ran == []


async def test_a_cancellation_nobody_asked_for_propagates() -> None:
    reg = Registry()
    started = asyncio.Event()

    @reg.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        started.set()
        await asyncio.Event().wait()

    executor = JobExecutor(reg)
    run = executor.attempt(make_job(type="long"))
    run.task = asyncio.get_running_loop().create_task(executor.execute(run))
    await started.wait()
    run.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run.task


async def test_an_attempt_left_leased_at_shutdown_reports_nothing() -> None:
    reg = Registry()
    started, release = threading.Event(), threading.Event()

    @reg.handler("stuck")
    def stuck(ctx: JobContext, payload: Any) -> None:
        started.set()
        release.wait(10)  # ignores its token, as a stuck handler does

    executor = JobExecutor(reg, threads=1)
    run = executor.attempt(make_job(type="stuck"))
    run.task = asyncio.get_running_loop().create_task(executor.execute(run))
    await asyncio.to_thread(started.wait, 10)
    run.stop(STOP_SHUTDOWN)  # a thread cannot be cancelled: the task keeps waiting
    assert run.thread_running and not run.task.done()
    run.left = True
    run.task.cancel()
    try:
        assert await run.task is None
    finally:
        release.set()
        executor.shutdown()
