"""The worker's services each on its own: state, heartbeat, handoff, reporter, shutdown.

No worker composes them here: each gets a WorkerState and the callables the
composer would give it, and the test checks what it does with them. The
store is a stand-in; what the store guarantees is tested against PostgreSQL
in tests/integration.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from jobrun.config import Config
from jobrun.domain import HandoffOffer, Job, JobState, Outcome, OutcomeKind
from jobrun.errors import LeaseLost
from jobrun.registry import JobContext, Registry
from jobrun.telemetry.hooks import Observer
from jobrun.testing import make_job
from jobrun.worker.attempt import STOP_CANCELLED, Attempt
from jobrun.worker.executor import JobExecutor
from jobrun.worker.handoff import Handoff
from jobrun.worker.heartbeat import Heartbeat
from jobrun.worker.reporter import Reporter
from jobrun.worker.settings import WorkerSettings
from jobrun.worker.shutdown import Shutdown
from jobrun.worker.state import WorkerState

LOG = logging.getLogger("jobrun.worker")


def worker_settings(**config: Any) -> WorkerSettings:
    """The worker settings of a ``Config`` with ``config`` (the old worker default concurrency)."""
    config.setdefault("concurrency", 10)
    return WorkerSettings.from_config(Config(**config))


def state(concurrency: int = 2, claim_ahead: float = 0.05) -> WorkerState:
    made = WorkerState(concurrency, claim_ahead)
    made.open()
    return made


def attempt(job: Job | None = None) -> Attempt:
    job = job or make_job()
    return Attempt(job=job, handler=None, ctx=JobContext(job), started=0.0)


# -- state --------------------------------------------------------------------------------------


async def test_the_state_counts_what_it_holds_and_the_room_left() -> None:
    st = state(concurrency=2)
    running, buffered = attempt(), make_job()
    st.running[running.job.id.int] = running
    st.executing = 1
    st.ahead.append((buffered, 0.0))
    assert st.held == 2 and st.room() == 1
    assert st.holds(running.job) and st.holds(buffered) and not st.holds(make_job())


async def test_only_buffered_jobs_past_their_patience_are_taken_back() -> None:
    st = state(claim_ahead=0.05)  # patience: half a second
    old, new = make_job(), make_job()
    now = time.monotonic()  # the clock the claimer stamps buffered jobs with
    st.ahead.extend([(old, now - 1.0), (new, now)])
    st.last_claim_full = True
    assert st.take_stale() == [old]
    assert [job for job, _ in st.ahead] == [new]
    assert not st.last_claim_full  # claims are for free slots until one comes back full


async def test_dropping_buffered_jobs_goes_by_identity_not_by_id() -> None:
    st = state()
    job = make_job()
    again = job.model_copy()  # the same id, claimed anew
    st.ahead.extend([(job, 0.0), (again, 0.0)])
    st.drop_ahead([job])
    assert [entry[0] for entry in st.ahead] == [again]


def test_a_stop_request_before_the_worker_runs_is_a_usage_error() -> None:
    from jobrun.errors import UsageError

    with pytest.raises(UsageError, match="not running"):
        WorkerState(1, 0.0).request_stop()


# -- heartbeat ----------------------------------------------------------------------------------


class Beats:
    """A heartbeat store that keeps only the ids in ``keep`` and tells when it was asked."""

    def __init__(self, keep: set[UUID]) -> None:
        self.keep = keep
        self.asked: list[list[Job]] = []
        self.called = asyncio.Event()

    async def heartbeat(
        self,
        owner: str,
        jobs: Sequence[Job],
        lease: timedelta,
        *,
        progress: Sequence[tuple[Job, float, str]] = (),
    ) -> set[UUID]:
        self.asked.append(list(jobs))
        self.called.set()
        return {job.id for job in jobs if job.id in self.keep}


async def test_the_heartbeat_stops_what_was_not_kept_and_reports_dropped_buffered_jobs() -> None:
    st = state()
    kept, lost = attempt(), attempt()
    buffered_kept, buffered_lost = make_job(), make_job()
    for run in (kept, lost):
        st.running[run.job.id.int] = run
    st.ahead.extend([(buffered_kept, 0.0), (buffered_lost, 0.0)])
    store = Beats({kept.job.id, buffered_kept.id})
    submitted: list[Outcome] = []
    settings = worker_settings(
        lease=timedelta(milliseconds=30), heartbeat_every=timedelta(milliseconds=1)
    )
    beat = Heartbeat(store, st, settings, owner="w", submit=submitted.append, log=LOG)  # type: ignore[arg-type]
    task = asyncio.create_task(beat.run())
    await asyncio.wait_for(store.called.wait(), 5)
    task.cancel()
    assert {j.id for j in store.asked[0]} == {
        kept.job.id,
        lost.job.id,
        buffered_kept.id,
        buffered_lost.id,
    }
    assert (kept.stop_reason, lost.stop_reason) == (None, STOP_CANCELLED)
    assert lost.ctx.token.reason == STOP_CANCELLED
    assert [entry[0] for entry in st.ahead] == [buffered_kept]
    assert [(o.job, o.kind) for o in submitted] == [(buffered_lost, OutcomeKind.FAIL)]


# -- handoff ------------------------------------------------------------------------------------


class Inbox:
    def __init__(self, owner: str, deliver: Any) -> None:
        self.deliver = deliver
        self.ready = True
        self.channel = "test.handoff"
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Receiver:
    def __init__(self) -> None:
        self.inbox: Inbox | None = None

    async def wait(self, queues: Sequence[str], timeout: timedelta) -> bool:  # noqa: ASYNC109
        return False

    def receive_handoffs(self, owner: str, deliver: Any) -> Inbox:
        self.inbox = Inbox(owner, deliver)
        return self.inbox


def handoff(st: WorkerState) -> tuple[Handoff, Receiver, list[Job], list[tuple[Job, str]]]:
    started: list[Job] = []
    given: list[tuple[Job, str]] = []
    service = Handoff(
        Beats(set()),  # type: ignore[arg-type]
        st,
        worker_settings(poll=timedelta(seconds=2)),
        owner="w",
        start=started.append,
        give_back=lambda job, reason: given.append((job, reason)),
        observer=None,
        log=LOG,
    )
    receiver = Receiver()
    service.open(receiver)  # type: ignore[arg-type]
    return service, receiver, started, given


async def test_handoff_offers_only_while_its_inbox_is_ready_and_the_worker_runs() -> None:
    st = state()
    service, receiver, _, _ = handoff(st)
    assert service.offer() == HandoffOffer(
        channel="test.handoff", ttl=timedelta(seconds=5), confirm_within=timedelta(seconds=5)
    )
    assert receiver.inbox is not None
    receiver.inbox.ready = False
    assert service.offer() is None
    receiver.inbox.ready = True
    st.request_stop()
    assert service.offer() is None
    service.close()
    assert receiver.inbox.closed


async def test_a_handed_job_starts_in_a_free_slot_else_goes_back() -> None:
    st = state(concurrency=1)
    _, receiver, started, given = handoff(st)
    assert receiver.inbox is not None
    first, second = make_job(), make_job()
    receiver.inbox.deliver(first)
    assert started == [first]
    st.executing = 1  # what starting it would have done
    receiver.inbox.deliver(second)
    assert started == [first]
    assert given == [(second, "handed back: the worker had no free slot for a handed job")]


async def test_jobs_handed_during_a_claim_wait_for_it_to_return() -> None:
    st = state(concurrency=1)
    service, receiver, started, given = handoff(st)
    assert receiver.inbox is not None
    handed = make_job()
    service.claim_started()
    receiver.inbox.deliver(handed)
    assert started == [] and given == []
    service.claim_done()
    assert started == [handed]


async def test_a_job_handed_to_a_stopping_worker_goes_back() -> None:
    st = state()
    _, receiver, started, given = handoff(st)
    assert receiver.inbox is not None
    st.request_stop()
    late = make_job()
    receiver.inbox.deliver(late)
    assert started == []
    assert given == [(late, "handed back: the worker was stopping when the job was handed to it")]


async def test_a_handed_job_whose_confirmation_is_refused_is_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    st = state()
    store = Beats(set())  # keeps nothing: the job was given back meanwhile
    runs: list[Attempt] = []

    def start(job: Job) -> None:
        run = attempt(job)
        st.running[job.id.int] = run
        runs.append(run)

    settings = worker_settings(
        lease=timedelta(milliseconds=300), heartbeat_every=timedelta(milliseconds=100)
    )
    service = Handoff(
        store,  # type: ignore[arg-type]
        st,
        settings,
        owner="w",
        start=start,
        give_back=lambda job, reason: None,
        observer=None,
        log=LOG,
    )
    receiver = Receiver()
    service.open(receiver)  # type: ignore[arg-type]
    offer = service.offer()
    assert offer is not None and offer.confirm_within == settings.lease  # the shorter one
    assert receiver.inbox is not None
    handed = make_job()
    receiver.inbox.deliver(handed)
    confirming = asyncio.create_task(service.confirm())
    try:
        await asyncio.wait_for(store.called.wait(), 10)
    finally:
        confirming.cancel()
    assert [job.id for job in store.asked[0]] == [handed.id]
    assert runs[0].stop_reason == STOP_CANCELLED
    assert "was handed here but could not be confirmed" in caplog.text


# -- reporter -----------------------------------------------------------------------------------


class Finished(Observer):
    def __init__(self) -> None:
        self.seen: list[str] = []

    def finished(self, job: Job, outcome: str, run_seconds: float) -> None:
        self.seen.append(outcome)


async def report(
    outcome: Outcome, *results: Job | BaseException
) -> tuple[list[Outcome], list[str]]:
    sent: list[Outcome] = []
    answers = list(results)

    async def submit(o: Outcome) -> Job | BaseException:
        sent.append(o)
        return answers.pop(0)

    observer = Finished()
    reporter = Reporter(submit, owner="w", observer=observer, log=LOG)
    await reporter.report(attempt(outcome.job), outcome)
    return sent, observer.seen


async def test_the_reporter_logs_a_death_and_counts_it(caplog: pytest.LogCaptureFixture) -> None:
    job = make_job(type="boom")
    dead = job.model_copy(update={"state": JobState.DEAD})
    _, seen = await report(Outcome(job=job, kind=OutcomeKind.FAIL, detail="kaboom"), dead)
    assert seen == ["dead"]
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(f"job {job.id} (boom, attempt 1): failed:dead in ")


async def test_a_completion_that_did_not_commit_is_reported_again_as_a_failure() -> None:
    job = make_job()
    queued = job.model_copy(update={"state": JobState.QUEUED})
    sent, seen = await report(Outcome(job=job), RuntimeError("effect failed"), queued)
    assert [o.kind for o in sent] == [OutcomeKind.COMPLETE, OutcomeKind.FAIL]
    assert sent[1].detail.startswith("completion failed: ")
    assert "RuntimeError: effect failed" in sent[1].detail
    assert seen == ["failed"]  # the failed completion itself was not recorded


async def test_a_lost_lease_is_a_warning_and_an_outcome_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = make_job()
    _, seen = await report(Outcome(job=job), LeaseLost(job.id, "w"))
    assert seen == ["lease_lost"]
    assert "lease_lost" in caplog.records[0].getMessage()


# -- shutdown -----------------------------------------------------------------------------------


async def test_the_shutdown_hands_buffered_jobs_back_and_stops_what_outlives_the_grace() -> None:
    reg = Registry()
    entered = asyncio.Event()

    @reg.handler("long")
    async def long(ctx: JobContext, payload: Any) -> None:
        entered.set()
        await asyncio.Event().wait()

    st = state()
    executor = JobExecutor(reg)
    run = executor.attempt(make_job(type="long"))
    outcomes: list[Outcome | None] = []

    async def runner() -> None:
        try:
            outcomes.append(await executor.execute(run))
        finally:
            st.running.pop(run.job.id.int, None)

    st.running[run.job.id.int] = run
    run.task = asyncio.create_task(runner())
    buffered = make_job()
    st.ahead.append((buffered, 0.0))
    given: list[tuple[Job, str]] = []
    settings = worker_settings(shutdown_grace=timedelta(0))
    shutdown = Shutdown(
        st, settings, owner="w", give_back=lambda j, r: given.append((j, r)), log=LOG
    )
    await entered.wait()
    await asyncio.wait_for(shutdown.drain(), 10)
    assert given == [(buffered, "handed back: the worker shut down before the job started")]
    assert st.handing_back and not st.running
    (outcome,) = outcomes
    assert outcome is not None and outcome.kind is OutcomeKind.RELEASE
