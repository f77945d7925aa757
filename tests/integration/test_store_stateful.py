"""Random sequences of store operations against the real Store on a real database.

A hypothesis state machine keeps a model of every job (state, attempts, owner,
cancel request, lease expiry, due-ness, effect) and drives the async Store
through enqueue (keyed, replayed, conflicting), batches, claims by two owners,
heartbeats, completions with and without a commit callback, failures, cancels,
retries and reaps. After every step the database must agree with the model,
and each job's recorded events must be a legal walk of the state machine that
ends in its current state.

Each example gets its own database cloned from the migrated template and its
own event loop, so examples are independent and the machine stays synchronous.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from jobrun.domain import Backoff, Job, JobState, NewJob
from jobrun.errors import IdempotencyConflict, InvalidTransition, LeaseLost
from jobrun.postgres import open_pool
from jobrun.postgres.store import Store
from tests.conftest import create_database, drop_database

OWNERS = ("w1", "w2")
QUEUES = ("q1", "q2")
# Mostly one type: keyed jobs of one type share their effect key across queues,
# which is one of the two ways a job meets an effect that already committed.
TYPES = ("email", "email", "bill")
KEYS = ("k1", "k2", "k3")
PAYLOADS = ({}, {"a": 1}, {"a": 2, "b": [1, 2]})
LONG = timedelta(hours=1)
EXPIRED = timedelta(0)  # claim's now() + 0: expired for every later transaction
# Long enough that a job failed or reaped during an example never comes due
# again within it: the model says "not due", the database must agree.
BACKOFF = Backoff(base=timedelta(minutes=1), max=timedelta(minutes=10))

# Every (event kind, from state, to state) the store may record.
LEGAL = {
    ("enqueued", None, JobState.QUEUED),
    ("claimed", JobState.QUEUED, JobState.LEASED),
    ("succeeded", JobState.LEASED, JobState.SUCCEEDED),
    ("cancelled", JobState.LEASED, JobState.CANCELLED),
    ("cancelled", JobState.QUEUED, JobState.CANCELLED),
    ("failed", JobState.LEASED, JobState.QUEUED),
    ("dead", JobState.LEASED, JobState.DEAD),
    ("cancel_requested", JobState.LEASED, JobState.LEASED),
    ("reaped", JobState.LEASED, JobState.QUEUED),
    ("reaped", JobState.LEASED, JobState.DEAD),
    ("reaped", JobState.LEASED, JobState.CANCELLED),
    ("retried", JobState.DEAD, JobState.QUEUED),
    ("retried", JobState.CANCELLED, JobState.QUEUED),
    ("released", JobState.LEASED, JobState.QUEUED),
}


class CallbackFailed(Exception):
    """Raised by a commit callback on purpose, after it wrote its effect row."""


@dataclass
class Model:
    """What the store should hold for one job."""

    id: UUID
    queue: str
    type: str
    key: str | None
    body: tuple[Any, ...]
    max_attempts: int
    state: JobState = JobState.QUEUED
    attempts: int = 0
    owner: str | None = None
    cancel_requested: bool = False
    lease_expired: bool = False
    due: bool = True
    logged: int = 0

    @property
    def effect_key(self) -> tuple[str, str]:
        # Idempotency keys are per queue, and so is the effect they guard.
        if self.key is None:
            return (self.type, str(self.id))
        return (self.type, f"{self.queue}\x00{self.key}")


new_jobs = st.builds(
    lambda queue, type_, payload, priority, max_attempts, key: NewJob(
        type=type_,
        payload=payload,
        queue=queue,
        priority=priority,
        max_attempts=max_attempts,
        idempotency_key=key,
        backoff=BACKOFF,
    ),
    st.sampled_from(QUEUES),
    st.sampled_from(TYPES),
    st.sampled_from(PAYLOADS),
    st.integers(0, 1),
    st.integers(1, 3),
    st.one_of(st.none(), st.sampled_from(KEYS)),
)


class StoreMachine(RuleBasedStateMachine):
    """The model-versus-store machine; ``admin_url`` and ``template`` are bound per test."""

    admin_url: str
    template: str

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dbname, url = create_database(self.admin_url, template=self.template)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE effects_log (job_id uuid NOT NULL)")
        self.pool = self.run(open_pool(url, worker_concurrency=2))
        self.store = Store(self.pool)
        self.jobs: dict[UUID, Model] = {}
        self.keys: dict[tuple[str, str], UUID] = {}
        self.effects_done: set[tuple[str, str]] = set()

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self.pool.close())
            self.loop.close()
        finally:
            drop_database(self.admin_url, self.dbname)

    # -- model helpers ---------------------------------------------------------

    def _expect_enqueue(self, new: NewJob) -> UUID | IdempotencyConflict:
        """Apply one enqueue to the model; the id it should return, or the conflict."""
        body = (
            new.type,
            new.payload,
            new.priority,
            new.max_attempts,
            new.backoff,
        )
        if new.idempotency_key is not None:
            existing = self.keys.get((new.queue, new.idempotency_key))
            if existing is not None:
                if self.jobs[existing].body == body:
                    return existing
                return IdempotencyConflict(new.queue, new.idempotency_key, existing)
            self.keys[(new.queue, new.idempotency_key)] = new.id
        self.jobs[new.id] = Model(
            id=new.id,
            queue=new.queue,
            type=new.type,
            key=new.idempotency_key,
            body=body,
            max_attempts=new.max_attempts,
        )
        return new.id

    def _holds(self, job_id: UUID, owner: str) -> bool:
        # The lease fence: the owner, and a lease that has not expired (an
        # expired lease is lost before the reaper sees it).
        m = self.jobs[job_id]
        return m.state is JobState.LEASED and m.owner == owner and not m.lease_expired

    def _leave_lease(self, m: Model, state: JobState) -> None:
        # Complete and fail keep the cancel flag (the reaper and retry clear it).
        m.state = state
        m.owner = None
        m.lease_expired = False

    def _pick(self, data: st.DataObject, prefer: Callable[[Model], bool]) -> Model:
        """Any job, but mostly one for which ``prefer`` holds (if there is one).

        Uniform picks would rarely hit the interesting states (leased, dead,
        cancelled) often enough to reach long paths like complete, retry,
        claim, complete again.
        """
        preferred = sorted(m.id for m in self.jobs.values() if prefer(m))
        pool = preferred if preferred and data.draw(st.integers(0, 3), label="prefer") else None
        job_id = data.draw(st.sampled_from(pool or sorted(self.jobs)), label="job")
        return self.jobs[job_id]

    def _owner(self, data: st.DataObject, m: Model) -> str:
        """The job's lease owner most of the time, any owner otherwise."""
        if m.owner is not None and data.draw(st.integers(0, 3), label="owner bias"):
            return m.owner
        return data.draw(st.sampled_from(OWNERS), label="owner")

    # -- rules -----------------------------------------------------------------

    @initialize(batch=st.lists(new_jobs, min_size=2, max_size=6))
    def start(self, batch: list[NewJob]) -> None:
        """Start from an empty store and a first batch, so claims have work from step one."""
        assert self.run(self.store.list_jobs()).jobs == []
        self.enqueue_batch(batch)

    @rule(new=new_jobs, mode=st.sampled_from(["new", "replay", "twin"]), data=st.data())
    def enqueue(self, new: NewJob, mode: str, data: st.DataObject) -> None:
        """Enqueue a new job, replay a stored keyed one, or add its twin in the other queue.

        A twin has the same type and key, so it shares the effect key: its
        commit callback must be skipped once the first one's effect committed.
        """
        if mode == "twin" and self.keys:
            (queue, key), job_id = data.draw(st.sampled_from(sorted(self.keys.items())))
            other = QUEUES[1] if queue == QUEUES[0] else QUEUES[0]
            new = NewJob(
                type=self.jobs[job_id].type, queue=other, idempotency_key=key, backoff=BACKOFF
            )
        if mode == "replay" and self.keys:
            # Offer exactly the body of a stored keyed job under its key.
            (queue, key), job_id = data.draw(st.sampled_from(sorted(self.keys.items())))
            m = self.jobs[job_id]
            type_, payload, priority, max_attempts, backoff = m.body
            new = NewJob(
                type=type_,
                payload=payload,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                backoff=backoff,
                idempotency_key=key,
            )
        expected = self._expect_enqueue(new)
        try:
            got = self.run(self.store.enqueue(new))
        except IdempotencyConflict as conflict:
            assert isinstance(expected, IdempotencyConflict), conflict
            assert conflict.existing_id == expected.existing_id
            return
        assert not isinstance(expected, IdempotencyConflict), f"expected {expected}, got {got}"
        assert got.id == expected
        assert got.state is self.jobs[expected].state

    @rule(batch=st.lists(new_jobs, min_size=1, max_size=4))
    def enqueue_batch(self, batch: list[NewJob]) -> None:
        expected = [self._expect_enqueue(new) for new in batch]
        got = self.run(self.store.enqueue_batch(batch))
        assert len(got) == len(batch)
        for want, result in zip(expected, got, strict=True):
            if isinstance(want, IdempotencyConflict):
                assert isinstance(result, IdempotencyConflict), result
                assert result.existing_id == want.existing_id
            else:
                assert isinstance(result, Job), result
                assert result.id == want

    @rule(
        owner=st.sampled_from(OWNERS),
        limit=st.integers(1, 3),
        short=st.booleans(),
        queues=st.sampled_from([QUEUES, QUEUES[:1], QUEUES[1:]]),
    )
    def claim(self, owner: str, limit: int, short: bool, queues: tuple[str, ...]) -> None:
        claimable = {
            m.id
            for m in self.jobs.values()
            if m.state is JobState.QUEUED and m.due and m.queue in queues
        }
        got = self.run(self.store.claim(queues, owner, limit, EXPIRED if short else LONG))
        assert len(got) == min(limit, len(claimable))
        assert {j.id for j in got} <= claimable
        for job in got:
            m = self.jobs[job.id]
            m.state = JobState.LEASED
            m.attempts += 1
            m.owner = owner
            m.lease_expired = short
            assert job.attempts == m.attempts
            assert job.lease_owner == owner

    @precondition(lambda self: self.jobs)
    @rule(owner=st.sampled_from(OWNERS), data=st.data())
    def heartbeat(self, owner: str, data: st.DataObject) -> None:
        ids = data.draw(st.lists(st.sampled_from(sorted(self.jobs)), max_size=4, unique=True))
        jobs = [self.run(self.store.get(i)) for i in ids]
        kept = self.run(self.store.heartbeat(owner, jobs, LONG))
        expected = {
            i
            for i in ids
            if self._holds(i, owner)
            and not self.jobs[i].lease_expired
            and not self.jobs[i].cancel_requested
        }
        assert kept == expected
        for i in kept:
            self.jobs[i].lease_expired = False

    @precondition(lambda self: self.jobs)
    @rule(callback=st.sampled_from(["none", "log", "log", "raise"]), data=st.data())
    def complete(self, callback: str, data: st.DataObject) -> None:
        leased = [m for m in self.jobs.values() if m.state is JobState.LEASED]
        if any(m.effect_key in self.effects_done for m in leased):
            # Aim at the exactly-once case: a leased job whose effect already committed.
            m = self._pick(
                data, lambda m: m.state is JobState.LEASED and m.effect_key in self.effects_done
            )
        else:
            m = self._pick(data, lambda m: m.state is JobState.LEASED)
        owner = self._owner(data, m)
        job = self.run(self.store.get(m.id))

        async def log_effect(conn: psycopg.AsyncConnection[Any]) -> None:
            await conn.execute("INSERT INTO effects_log (job_id) VALUES (%s)", [m.id])
            if callback == "raise":
                raise CallbackFailed(str(m.id))

        commit = None if callback == "none" else log_effect
        holds = self._holds(m.id, owner)
        # A cancel requested before the completion wins: the job ends cancelled,
        # its callback does not run and no ledger row is written.
        fresh = m.effect_key not in self.effects_done and not m.cancel_requested
        try:
            done = self.run(self.store.complete(job, owner, commit))
        except LeaseLost:
            assert not holds, "LeaseLost while the model says the lease is held"
            return
        except CallbackFailed:
            # The callback runs only when the effect is fresh; its failure rolls back everything.
            assert holds and fresh and callback == "raise"
            return
        assert holds, "completed a job whose lease the model says is lost"
        assert not (callback == "raise" and fresh), "a failing callback did not fail"
        state = JobState.CANCELLED if m.cancel_requested else JobState.SUCCEEDED
        assert done.state is state
        if commit is not None and fresh:
            m.logged += 1
        if state is JobState.SUCCEEDED:
            self.effects_done.add(m.effect_key)
        self._leave_lease(m, state)

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def fail(self, data: st.DataObject) -> None:
        m = self._pick(data, lambda m: m.state is JobState.LEASED)
        owner = self._owner(data, m)
        job = self.run(self.store.get(m.id))
        holds = self._holds(m.id, owner)
        try:
            failed = self.run(self.store.fail(job, owner, "boom"))
        except LeaseLost:
            assert not holds, "LeaseLost while the model says the lease is held"
            return
        assert holds, "failed a job whose lease the model says is lost"
        if m.cancel_requested:
            state = JobState.CANCELLED
        elif m.attempts >= m.max_attempts:
            state = JobState.DEAD
        else:
            state = JobState.QUEUED
            m.due = False  # due after its backoff, past db now
        assert failed.state is state
        self._leave_lease(m, state)

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        m = self._pick(data, lambda m: not m.state.is_terminal)
        try:
            got = self.run(self.store.cancel(m.id))
        except InvalidTransition:
            assert m.state.is_terminal
            return
        assert not m.state.is_terminal
        if m.state is JobState.QUEUED:
            m.state = JobState.CANCELLED
        else:
            m.cancel_requested = True
        assert got.state is m.state and got.cancel_requested == m.cancel_requested

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        m = self._pick(data, lambda m: m.state in (JobState.DEAD, JobState.CANCELLED))
        try:
            got = self.run(self.store.retry(m.id))
        except InvalidTransition:
            assert m.state not in (JobState.DEAD, JobState.CANCELLED)
            return
        assert m.state in (JobState.DEAD, JobState.CANCELLED)
        m.state = JobState.QUEUED
        m.due = True
        m.cancel_requested = False
        # A spent job gets one attempt back; max_attempts (part of the
        # replayable body) is never changed.
        m.attempts = min(m.attempts, m.max_attempts - 1)
        assert got.state is JobState.QUEUED and got.max_attempts == m.max_attempts
        assert got.attempts == m.attempts

    @rule(far=st.booleans())
    def reap(self, far: bool) -> None:
        """Reap at db now (only expired leases) or two hours on (every lease)."""
        now = self.run(self.store.now()) + (2 * LONG if far else timedelta(0))
        expected = {
            m.id
            for m in self.jobs.values()
            if m.state is JobState.LEASED and (far or m.lease_expired)
        }
        reaped = self.run(self.store.reap_expired(now=now))
        assert {j.id for j in reaped} == expected
        for job in reaped:
            m = self.jobs[job.id]
            if m.cancel_requested:
                state = JobState.CANCELLED
            elif m.attempts >= m.max_attempts:
                state = JobState.DEAD
            else:
                state = JobState.QUEUED
                m.due = False  # due after its backoff, past db now
            assert job.state is state
            m.cancel_requested = False
            self._leave_lease(m, state)

    # -- invariants --------------------------------------------------------------

    @invariant()
    def store_agrees_with_model(self) -> None:
        page = self.run(self.store.list_jobs(limit=10_000))
        stored = {j.id: j for j in page.jobs}
        assert set(stored) == set(self.jobs), "a job was lost or appeared from nowhere"
        for job_id, m in self.jobs.items():
            job = stored[job_id]
            assert job.state is m.state, (job_id, job.state, m.state)
            assert job.attempts == m.attempts
            assert job.max_attempts == m.max_attempts
            assert job.attempts <= job.max_attempts
            assert job.cancel_requested == m.cancel_requested
            assert job.lease_owner == m.owner
            assert (job.lease_expires_at is not None) == (m.state is JobState.LEASED)
            assert (job.finished_at is not None) == m.state.is_terminal

    @invariant()
    def events_are_legal_paths(self) -> None:
        for job_id, m in self.jobs.items():
            events = self.run(self.store.events(job_id))
            assert events, f"job {job_id} has no events"
            state: JobState | None = None
            attempts = 0
            for event in events:
                step = (event.kind, event.from_state, event.to_state)
                assert step in LEGAL, f"illegal event {step} for {job_id}"
                assert event.from_state == state, f"event {step} does not follow {state}"
                if event.kind == "claimed":
                    attempts += 1
                    assert event.attempt == attempts
                elif event.kind in ("retried", "released"):
                    # These may give one attempt back, never more.
                    assert event.attempt in (attempts, attempts - 1), step
                    attempts = event.attempt
                else:
                    assert event.attempt == attempts, step
                state = event.to_state
            assert state is m.state
            assert attempts == m.attempts

    @invariant()
    def effects_happen_at_most_once(self) -> None:
        async def counts() -> dict[UUID, int]:
            async with self.pool.connection() as conn:
                cur = await conn.execute("SELECT job_id, count(*) FROM effects_log GROUP BY 1")
                return {row[0]: row[1] for row in await cur.fetchall()}

        logged = self.run(counts())
        for job_id, count in logged.items():
            assert count <= 1, f"effect of {job_id} committed {count} times"
        assert logged == {m.id: m.logged for m in self.jobs.values() if m.logged}


def test_store_state_machine(pg_admin_url: str, _template_db: str) -> None:
    class Machine(StoreMachine):
        admin_url = pg_admin_url
        template = _template_db

    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


async def test_effect_shared_by_key_commits_once(pool: Any) -> None:
    """The machine's rarest exactly-once paths, pinned down: keys across queues, and a retry.

    Two jobs of one type with one key in two queues are two jobs (keys are per
    queue), so each effect commits; a job cancelled while running and then
    retried meets its own committed effect, so its second callback must not run.
    """
    async with pool.connection() as conn:
        await conn.execute("CREATE TABLE effects_log (job_id uuid NOT NULL)")
    store = Store(pool)

    async def log_effect(conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("INSERT INTO effects_log (job_id) VALUES (%s)", [job.id])

    first = await store.enqueue(NewJob(type="email", queue="q1", idempotency_key="k"))
    twin = await store.enqueue(NewJob(type="email", queue="q2", idempotency_key="k"))
    for queue, expected in (("q1", first.id), ("q2", twin.id)):
        (job,) = await store.claim([queue], "w1", 1, LONG)
        assert job.id == expected
        assert (await store.complete(job, "w1", log_effect)).state is JobState.SUCCEEDED

    lone = await store.enqueue(NewJob(type="bill", queue="q1"))
    (job,) = await store.claim(["q1"], "w1", 1, LONG)
    await store.cancel(lone.id)
    assert (await store.complete(job, "w1", log_effect)).state is JobState.CANCELLED
    await store.retry(lone.id)
    (job,) = await store.claim(["q1"], "w1", 1, LONG)
    assert (await store.complete(job, "w1", log_effect)).state is JobState.SUCCEEDED

    async with pool.connection() as conn:
        cur = await conn.execute("SELECT job_id FROM effects_log ORDER BY job_id")
        rows = [row[0] for row in await cur.fetchall()]
    assert rows == sorted([first.id, twin.id, lone.id])
