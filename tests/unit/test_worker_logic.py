"""Pure worker logic without a database: settings, group-commit batching, claim sizing.

The store here is a tiny in-memory stand-in that records calls; it checks the
worker's own bookkeeping only. Everything the store guarantees is tested
against the real store and PostgreSQL in tests/integration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import pytest

from jobrun.config import Config
from jobrun.domain import (
    Backoff,
    Dependency,
    HandoffOffer,
    Job,
    JobState,
    Outcome,
    OutcomeKind,
    WorkerReport,
)
from jobrun.errors import ConfigurationError, JobrunError, LeaseLost, UsageError
from jobrun.registry import JobContext, Registry
from jobrun.testing import eventually
from jobrun.worker import Completer, Worker


def make_job(job_type: str = "noop", owner: str = "w") -> Job:
    now = datetime.now(UTC)
    return Job(
        id=uuid4(),
        queue="default",
        type=job_type,
        payload={},
        priority=0,
        state=JobState.LEASED,
        attempts=1,
        max_attempts=3,
        backoff=Backoff(),
        run_at=now,
        lease_owner=owner,
        lease_expires_at=now + timedelta(seconds=30),
        cancel_requested=False,
        idempotency_key=None,
        last_error=None,
        created_at=now,
        updated_at=now,
        finished_at=None,
    )


class RecordingStore:
    """Just enough of the Store port for the worker's loops; records what it was asked."""

    def __init__(self, queued: int = 0, job_type: str = "noop") -> None:
        self.queued = [make_job(job_type) for _ in range(queued)]
        self.claims: list[int] = []
        self.batches: list[int] = []
        self.failed: list[tuple[Job, str]] = []
        self.completed: list[UUID] = []
        self.gate: asyncio.Event | None = None
        self.lost: set[UUID] = set()
        self.offers: list[HandoffOffer | None] = []
        self.retracted = 0
        self.kinds: list[OutcomeKind] = []
        self.seen: list[WorkerReport] = []
        self.gone: list[str] = []

    async def now(self) -> datetime:
        return datetime.now(UTC)

    async def claim(
        self,
        queues: Sequence[str],
        owner: str,
        limit: int,
        lease: timedelta,
        *,
        offer: HandoffOffer | None = None,
    ) -> list[Job]:
        self.claims.append(limit)
        self.offers.append(offer)
        taken, self.queued = self.queued[:limit], self.queued[limit:]
        return taken

    async def retract_offers(self, owner: str) -> int:
        self.retracted += 1
        return 1

    async def record_outcomes(
        self, owner: str, outcomes: Sequence[Outcome]
    ) -> list[Job | JobrunError]:
        self.batches.append(len(outcomes))
        if self.gate is not None:
            await self.gate.wait()
        out: list[Job | JobrunError] = []
        for o in outcomes:
            if o.job.id in self.lost:
                out.append(LeaseLost(o.job.id, owner))
            elif o.kind is OutcomeKind.COMPLETE:
                self.completed.append(o.job.id)
                out.append(o.job.model_copy(update={"state": JobState.SUCCEEDED}))
            else:
                self.failed.append((o.job, o.detail))
                self.kinds.append(o.kind)
                out.append(o.job.model_copy(update={"state": JobState.QUEUED}))
        return out

    async def dependencies_of(
        self, job_id: UUID, *, with_results: bool = False
    ) -> list[Dependency]:
        return []

    async def heartbeat(
        self,
        owner: str,
        jobs: Sequence[Job],
        lease: timedelta,
        *,
        progress: Sequence[tuple[Job, float, str]] = (),
    ) -> set[UUID]:
        return {j.id for j in jobs}

    async def reap_expired(self, limit: int = 1000, *, now: datetime | None = None) -> list[Job]:
        return []

    async def worker_seen(self, report: WorkerReport) -> None:
        self.seen.append(report)

    async def worker_gone(self, owner: str) -> None:
        self.gone.append(owner)


def worker(
    store: RecordingStore,
    reg: Registry,
    *,
    dispatcher: Any = None,
    owner: str | None = None,
    **settings: Any,
) -> Worker:
    """A worker with quick test settings (``settings`` are :class:`Config` fields)."""
    settings.setdefault("concurrency", 10)
    settings.setdefault("poll", timedelta(milliseconds=20))
    settings.setdefault("reap_every", None)
    config = Config(**settings)
    return Worker(store, reg, config, dispatcher=dispatcher, owner=owner)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"queues": ()}, "queue"),
        ({"lease": timedelta(0)}, "lease"),
        ({"heartbeat_every": timedelta(seconds=11)}, "third of the lease"),
        ({"poll": timedelta(seconds=-1)}, "poll must be positive"),
        ({"job_timeout": timedelta(0)}, "job_timeout"),
        ({"shutdown_grace": timedelta(seconds=-1)}, "shutdown_grace"),
        ({"reap_every": timedelta(0)}, "reap"),
        ({"claim_ahead": timedelta(milliseconds=-1)}, "claim_ahead"),
    ],
)
def test_bad_worker_settings_are_refused_by_the_config(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Config(**settings)


def test_an_empty_owner_is_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="owner"):
        Worker(RecordingStore(), Registry(), Config(), owner="")  # type: ignore[arg-type]


def test_default_owner_is_host_pid_random() -> None:
    a = Worker(RecordingStore(), Registry(), Config())  # type: ignore[arg-type]
    b = Worker(RecordingStore(), Registry(), Config())  # type: ignore[arg-type]
    assert a.owner != b.owner
    assert a.owner.count(":") == 2


async def test_completer_flushes_a_lone_job_at_once() -> None:
    store = RecordingStore()
    completer = Completer(store, "w")  # type: ignore[arg-type]
    runner = asyncio.create_task(completer.run())
    job = make_job()
    result = await asyncio.wait_for(completer.submit(Outcome(job=job)), 1)
    assert isinstance(result, Job)
    assert result.state is JobState.SUCCEEDED
    assert store.batches == [1]
    completer.close()
    await runner


async def test_completer_grows_batches_while_a_commit_is_in_flight() -> None:
    store = RecordingStore()
    store.gate = asyncio.Event()
    completer = Completer(store, "w", max_inflight=1)  # type: ignore[arg-type]
    runner = asyncio.create_task(completer.run())
    first = completer.submit(Outcome(job=make_job()))
    await eventually(lambda: store.batches == [1], what="the first batch in flight")
    rest = [completer.submit(Outcome(job=make_job())) for _ in range(50)]
    store.gate.set()
    await asyncio.gather(first, *rest)
    assert store.batches == [1, 50]
    completer.close()
    await runner


async def test_completer_caps_batch_size_and_reports_per_job_errors() -> None:
    store = RecordingStore()
    completer = Completer(store, "w", max_batch=10)  # type: ignore[arg-type]
    jobs = [make_job() for _ in range(25)]
    store.lost = {jobs[3].id}
    futures = [completer.submit(Outcome(job=j)) for j in jobs]
    runner = asyncio.create_task(completer.run())
    results = await asyncio.gather(*futures)
    assert max(store.batches) <= 10
    assert sum(store.batches) == 25
    assert isinstance(results[3], LeaseLost)
    assert all(isinstance(r, Job) for i, r in enumerate(results) if i != 3)
    completer.close()
    await runner


async def test_completer_turns_a_store_exception_into_per_job_results() -> None:
    class Broken(RecordingStore):
        async def record_outcomes(
            self, owner: str, outcomes: Sequence[Outcome]
        ) -> list[Job | JobrunError]:
            raise OSError("connection reset")

    completer = Completer(Broken(), "w")  # type: ignore[arg-type]
    runner = asyncio.create_task(completer.run())
    results = await asyncio.gather(*(completer.submit(Outcome(job=make_job())) for _ in range(3)))
    assert all(isinstance(r, OSError) for r in results)
    completer.close()
    await runner


async def test_claims_are_sized_to_free_slots_and_batches_group() -> None:
    store = RecordingStore(queued=250)
    reg = Registry()

    @reg.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        return None

    w = worker(store, reg, concurrency=100)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    await eventually(lambda: len(store.completed) == 250)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert len(store.completed) == 250
    assert store.claims[0] == 100
    assert all(limit <= 100 for limit in store.claims)
    # Group commit: far fewer completion batches than jobs.
    assert len(store.batches) < 50


async def test_a_failing_handler_reports_a_fail_outcome_with_its_traceback() -> None:
    store = RecordingStore(queued=1, job_type="boom")
    reg = Registry()

    @reg.handler("boom")
    async def boom(ctx: JobContext, payload: Any) -> None:
        raise ValueError("kaboom")

    w = worker(store, reg)
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    await eventually(lambda: store.failed)
    stop.set()
    await asyncio.wait_for(task, 5)
    # The worker decides no retry time: the store computes it from the job's
    # backoff and the database clock (tested against PostgreSQL).
    _, error = store.failed[0]
    assert "ValueError: kaboom" in error


async def test_stop_event_with_an_idle_worker_returns_promptly() -> None:
    w = worker(RecordingStore(), Registry(), poll=timedelta(seconds=60))
    w.signals.init()
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    assert await w.signals.idle.wait() == "notification"  # waiting out its 60 s poll
    stop.set()
    # Well before the poll would have ended the wait: the stop ended it.
    await asyncio.wait_for(task, 30)


async def test_a_worker_runs_once() -> None:
    w = worker(RecordingStore(), Registry())
    stop = asyncio.Event()
    stop.set()
    await w.run(stop)
    with pytest.raises(UsageError, match="runs once"):
        await w.run(stop)


async def test_a_job_claimed_again_while_its_stale_attempt_runs_is_not_started(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The same job id coming back from a claim while this worker still runs an
    # earlier attempt of it (that lease was reaped and the job re-claimed by
    # this owner): starting it would run the job twice in one process.
    job = make_job("slow")
    again = job.model_copy(update={"attempts": 2})
    store = RecordingStore()
    store.queued = [job, again]
    reg = Registry()
    started: list[int] = []
    release = asyncio.Event()

    @reg.handler("slow")
    async def slow(ctx: JobContext, payload: Any) -> None:
        started.append(ctx.attempt)
        await release.wait()

    w = worker(store, reg, concurrency=2)  # one claim returns both
    w.signals.init()
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    # Emitted once the claim's jobs were started (or refused); a task started
    # with them has taken its first step, into its handler, before this wakes.
    claimed = await w.signals.claimed.wait()
    assert [j.attempts for j in claimed] == [1, 2]
    assert store.claims[0] == 2 and not store.queued
    assert w.running == 1 and started == [1]  # the second copy was not started
    assert "claimed again while its attempt 1 still runs here" in caplog.text
    release.set()
    stop.set()
    await asyncio.wait_for(task, 5)
    assert started == [1]


# -- handoff: jobs an enqueue leased straight to this worker ------------------------------


class HandingDispatcher:
    """A dispatcher that hands jobs over on request, as the notifier does on a notification."""

    def __init__(self) -> None:
        self.deliver: Any = None
        self.ready = True
        self.channel = "test.handoff"

    async def wait(self, queues: Sequence[str], timeout: timedelta) -> bool:  # noqa: ASYNC109
        await asyncio.sleep(timeout.total_seconds())
        return False

    def receive_handoffs(self, owner: str, deliver: Any) -> HandingDispatcher:
        self.deliver = deliver
        return self

    def close(self) -> None:
        self.deliver = None


async def started(worker: Worker, stop: asyncio.Event) -> asyncio.Task[None]:
    """Run ``worker`` (its test signals on) until its first claim has returned."""
    worker.signals.init()
    task = asyncio.create_task(worker.run(stop))
    await worker.signals.claimed.wait()
    return task


async def given_back(worker: Worker, job: Job) -> Job | BaseException:
    """Wait until the worker has recorded an outcome for ``job``; return its result."""
    batch = await worker.signals.recorded.wait_for(lambda b: any(o.job is job for o, _ in b))
    return next(result for outcome, result in batch if outcome.job is job)


async def test_an_idle_worker_offers_its_free_slots_and_runs_what_is_handed_to_it() -> None:
    store, reg, ran = RecordingStore(), Registry(), asyncio.Event()

    @reg.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        ran.set()

    dispatcher = HandingDispatcher()
    w = worker(store, reg, concurrency=4, dispatcher=dispatcher)
    stop = asyncio.Event()
    task = await started(w, stop)
    offer = store.offers[0]
    assert offer is not None and offer.channel == "test.handoff"
    job = make_job(owner=w.owner)
    dispatcher.deliver(job)
    await asyncio.wait_for(ran.wait(), 2)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert store.completed == [job.id]
    assert store.retracted == 1  # withdrawn before the shutdown drain
    assert dispatcher.deliver is None  # and the inbox closed


async def test_a_worker_offers_nothing_while_its_inbox_is_not_ready() -> None:
    store = RecordingStore()
    dispatcher = HandingDispatcher()
    dispatcher.ready = False
    w = worker(store, Registry(), dispatcher=dispatcher)
    stop = asyncio.Event()
    task = await started(w, stop)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert store.offers and all(o is None for o in store.offers)


async def test_a_handed_job_beyond_the_free_slots_is_given_back_uncounted() -> None:
    store, reg = RecordingStore(), Registry()
    release, running = asyncio.Event(), asyncio.Event()
    entered: list[UUID] = []

    @reg.handler("block")
    async def block(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.job.id)
        running.set()
        await release.wait()

    dispatcher = HandingDispatcher()
    w = worker(store, reg, concurrency=1, dispatcher=dispatcher)
    stop = asyncio.Event()
    task = await started(w, stop)
    first, second = make_job("block", w.owner), make_job("block", w.owner)
    dispatcher.deliver(first)
    await asyncio.wait_for(running.wait(), 5)
    dispatcher.deliver(second)  # the one slot is taken
    await given_back(w, second)
    assert entered == [first.id]
    assert store.kinds == [OutcomeKind.RELEASE]
    assert store.failed[0][0].id == second.id and "no free slot" in store.failed[0][1]
    release.set()
    stop.set()
    await asyncio.wait_for(task, 5)
    assert store.completed == [first.id]


async def test_a_job_handed_while_a_claim_is_in_flight_waits_for_the_claims_jobs() -> None:
    # The claim was sized before the handoff: its jobs take the slots first,
    # and the handed job is given back rather than run over the limit.
    class SlowClaim(RecordingStore):
        def __init__(self) -> None:
            super().__init__()
            self.in_claim = asyncio.Event()
            self.go = asyncio.Event()

        async def claim(self, *args: Any, **kw: Any) -> list[Job]:
            if len(self.claims) == 1:
                self.queued = [make_job("block", args[1])]
                self.in_claim.set()
                await self.go.wait()
            return await super().claim(*args, **kw)

    store, reg = SlowClaim(), Registry()
    release, running = asyncio.Event(), asyncio.Event()
    entered: list[UUID] = []

    @reg.handler("block")
    async def block(ctx: JobContext, payload: Any) -> None:
        entered.append(ctx.job.id)
        running.set()
        await release.wait()

    dispatcher = HandingDispatcher()
    w = worker(store, reg, concurrency=1, dispatcher=dispatcher)
    w.signals.init()
    stop = asyncio.Event()
    task = asyncio.create_task(w.run(stop))
    await asyncio.wait_for(store.in_claim.wait(), 5)  # the second claim is in flight
    claimed = store.queued[0]
    handed = make_job("block", w.owner)
    dispatcher.deliver(handed)
    # Held until the claim returns: not started (nor buffered) when delivered.
    assert w.running == 0 and entered == []
    store.go.set()
    await given_back(w, handed)
    await asyncio.wait_for(running.wait(), 5)
    assert entered == [claimed.id]
    assert [j.id for j, _ in store.failed] == [handed.id]
    assert store.kinds == [OutcomeKind.RELEASE]
    release.set()
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_a_job_handed_to_a_stopping_worker_is_given_back() -> None:
    store, reg = RecordingStore(), Registry()
    release, running = asyncio.Event(), asyncio.Event()

    @reg.handler("block")
    async def block(ctx: JobContext, payload: Any) -> None:
        running.set()
        await release.wait()

    dispatcher = HandingDispatcher()
    w = worker(store, reg, concurrency=4, dispatcher=dispatcher)
    stop = asyncio.Event()
    task = await started(w, stop)
    dispatcher.deliver(make_job("block", w.owner))  # keeps the shutdown in its drain
    await asyncio.wait_for(running.wait(), 5)
    deliver = dispatcher.deliver
    stop.set()
    assert await w.signals.stopping.wait() is True  # a graceful stop, seen by the worker
    late = make_job("block", w.owner)
    deliver(late)
    await given_back(w, late)
    assert [j.id for j, _ in store.failed] == [late.id]
    assert "stopping" in store.failed[0][1]
    release.set()
    await asyncio.wait_for(task, 5)


async def test_a_job_stopped_before_its_task_began_is_still_reported_and_freed() -> None:
    # A heartbeat can come back without a job whose task was created but has
    # not run yet (a job claimed again just after its earlier attempt ended).
    # Cancelling such a task skips the coroutine, finally blocks included, so
    # the run used to stay in the worker for good: a drain never ended.
    store = RecordingStore()
    reg = Registry()
    ran: list[UUID] = []

    @reg.handler("noop")
    async def noop(ctx: JobContext, payload: Any) -> None:
        ran.append(ctx.job.id)

    w = worker(store, reg)
    stop = asyncio.Event()
    task = await started(w, stop)
    job = make_job(owner=w.owner)
    w._runner.start(job)
    w._state.running[job.id.int].stop("cancelled")  # before the task's first step
    await eventually(lambda: job.id.int not in w._state.running)
    assert job.id.int not in w._state.running
    assert w._state.executing == 0
    assert ran == []
    assert [(j.id, "stopped" in detail) for j, detail in store.failed] == [(job.id, True)]
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_a_worker_writes_its_row_with_the_jobs_it_runs_and_deletes_it_when_it_stops() -> None:
    store = RecordingStore(queued=1, job_type="slow")
    reg = Registry()
    release = asyncio.Event()

    @reg.handler("slow")
    async def slow(ctx: JobContext, payload: Any) -> None:
        await release.wait()

    w = worker(
        store, reg, owner="host:1:ab", queues=("a/b", "c"), lease="3s", heartbeat_every="50ms"
    )
    task = asyncio.create_task(w.run())

    def reported_running() -> WorkerReport | None:
        return next((r for r in store.seen if r.running), None)

    report = await eventually(reported_running, what="a row listing the running job")
    assert (report.owner, report.queues, report.concurrency) == ("host:1:ab", ("a/b", "c"), 10)
    assert report.beat == timedelta(milliseconds=50)
    assert [job.type for job in report.running] == ["slow"]
    assert report.running[0].started_at <= datetime.now(UTC)
    release.set()
    w.request_stop()
    await task
    assert store.gone == ["host:1:ab"]
