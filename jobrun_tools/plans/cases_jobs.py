"""The cases of ``db/query/jobs.sql`` (see :mod:`jobrun_tools.plans.cases`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg

from jobrun.sqlc import concurrency, dependencies, jobs, progress, results, unique
from jobrun.sqlc.models import BackoffKind, JobOutcome, JobState
from jobrun_tools.plans.capture import recording
from jobrun_tools.plans.cases import Case, Facts, Given

__all__ = ["FENCE_BATCH", "cases"]

FENCE_BATCH = 500
"""Jobs the fenced-update cases lease first, then heartbeat and complete in one statement."""

_FENCE_OWNER = "plans-fence"
_LEASE = timedelta(minutes=5)
# Ids no build writes (the scale database's are 01900000-...-8000-<row number>).
_NEW_ID = UUID("01900000-0000-7000-8000-ffffffff0001")
# The first of the scale database's waiting jobs (ScaleFillDependencies numbers them).
FIRST_WAITING = UUID("01a00000-0000-7000-8000-000000000001")


def _insert(queue: str, key: str | None) -> jobs.JobInsertParams:
    return jobs.JobInsertParams(
        id=_NEW_ID,
        queue=queue,
        type="send_email",
        payload={"to": "user@example.com"},
        priority=0,
        max_attempts=25,
        backoff_kind=BackoffKind.EXPONENTIAL,
        backoff_base=timedelta(seconds=1),
        backoff_max=timedelta(hours=1),
        run_at=None,
        delay=timedelta(0),
        idempotency_key=key,
        meta=None,
    )


def _notify() -> jobs.JobInsertNotifyParams:
    return jobs.JobInsertNotifyParams(
        id=_NEW_ID,
        queue="default",
        type="sync_account",
        payload_json='{"account": 42}',
        priority=0,
        max_attempts=25,
        backoff_kind=BackoffKind.EXPONENTIAL,
        backoff_base=timedelta(seconds=1),
        backoff_max=timedelta(hours=1),
        run_at=None,
        delay=timedelta(0),
        meta=None,
        record_claim=True,
        channel="jobrun",
    )


def _queued(queue: str, key: str | None) -> jobs.JobInsertQueuedNotifyParams:
    return jobs.JobInsertQueuedNotifyParams(
        id=_NEW_ID,
        queue=queue,
        type="sync_account",
        payload_json='{"account": 42}',
        priority=0,
        max_attempts=25,
        backoff_kind=BackoffKind.EXPONENTIAL,
        backoff_base=timedelta(seconds=1),
        backoff_max=timedelta(hours=1),
        run_at=None,
        delay=timedelta(0),
        idempotency_key=key,
        meta=None,
        channel="jobrun",
    )


def _unique() -> unique.JobInsertUniqueParams:
    return unique.JobInsertUniqueParams(
        id=_NEW_ID,
        queue="default",
        type="sync_account",
        payload_json='{"account": 42}',
        priority=0,
        max_attempts=25,
        backoff_kind=BackoffKind.EXPONENTIAL,
        backoff_base=timedelta(seconds=1),
        backoff_max=timedelta(hours=1),
        run_at=None,
        delay=timedelta(0),
        meta=None,
        unique_base="9f" * 32,
        period=None,
        unique_states=3,
        channel="jobrun",
    )


def _dependent(ids: list[UUID]) -> dependencies.JobInsertDependentParams:
    return dependencies.JobInsertDependentParams(
        depends_on=ids,
        if_failed="cancel",
        id=_NEW_ID,
        queue="default",
        type="sync_account",
        payload_json='{"account": 42}',
        priority=0,
        max_attempts=25,
        backoff_kind=BackoffKind.EXPONENTIAL,
        backoff_base=timedelta(seconds=1),
        backoff_max=timedelta(hours=1),
        run_at=None,
        delay=timedelta(0),
        meta=None,
        channel="jobrun",
    )


def _keyed(key: str) -> concurrency.JobInsertKeyedParams:
    return concurrency.JobInsertKeyedParams(
        id=_NEW_ID,
        queue="default",
        type="sync_customer",
        payload_json="{}",
        priority=0,
        max_attempts=25,
        backoff_kind=BackoffKind.EXPONENTIAL,
        backoff_base=timedelta(seconds=1),
        backoff_max=timedelta(hours=1),
        run_at=None,
        delay=timedelta(0),
        meta=None,
        key=key,
        key_limit=2,
    )


def _queued_three(conn: psycopg.Connection[Any]) -> Given:
    """Three queued jobs of the default queue, in claim order."""
    page = jobs.Querier(conn).job_list(params=_list(state=JobState.QUEUED, max_jobs=3))
    return {"ids": [j.id for j in page]}


def _claim(queues: list[str], max_jobs: int, owner: str = "worker-9:4242") -> jobs.JobClaimParams:
    return jobs.JobClaimParams(
        queues=queues,
        max_jobs=max_jobs,
        now=None,
        owner=owner,
        lease=_LEASE,
        offer_channel="jobrun_w9",
        offer_lease=timedelta(seconds=30),
        offer_ttl=timedelta(seconds=5),
        record_events=True,
    )


def _lease_batch(conn: psycopg.Connection[Any]) -> Given:
    """Claim a batch of the default queue for the fenced cases (rolled back with them)."""
    claimed = jobs.Querier(conn).job_claim(params=_claim(["default"], FENCE_BATCH, _FENCE_OWNER))
    if not claimed:
        raise RuntimeError("the default queue has no due job to lease")
    return {"ids": [j.id for j in claimed], "attempts": [j.attempts for j in claimed]}


def _dead_page(conn: psycopg.Connection[Any]) -> Given:
    """The first 50 dead jobs, as a page of the dashboard lists them (for a delete)."""
    page = jobs.Querier(conn).job_list(params=_list(state=JobState.DEAD, max_jobs=50))
    return {"dead_ids": [j.id for j in page]}


def _list(**given: Any) -> jobs.JobListParams:
    params = jobs.JobListParams(
        queue=None,
        state=None,
        type=None,
        created_after=None,
        created_before=None,
        cursor=None,
        max_jobs=51,
    )
    for name, value in given.items():
        setattr(params, name, value)
    return params


def _purge(q: jobs.Querier, state: JobState, age: timedelta) -> Callable[[Given], object]:
    return lambda g: q.job_purge_state(state=state, now=None, older_than=age, batch_size=1000)


def _listing(q: jobs.Querier, params: jobs.JobListParams) -> Callable[[Given], object]:
    return lambda g: q.job_list(params=params)


def cases(f: Facts) -> dict[str, list[Case]]:
    """The cases of every query of jobs.sql and progress.sql."""
    q = jobs.Querier(recording())
    pq = progress.Querier(recording())
    rq = results.Querier(recording())
    uq = unique.Querier(recording())
    dq = dependencies.Querier(recording())
    cq = concurrency.Querier(recording())
    fact = f.jobs
    keys = [f"order-new-{i}" for i in range(100)]
    listing = {
        "all": ("every job, first page of 50", _list()),
        "all-next": ("every job, next page", _list(cursor=fact.page_cursor)),
        "dead": ("dead jobs, first page", _list(state=JobState.DEAD)),
        "dead-next": (
            "dead jobs, next page",
            _list(state=JobState.DEAD, cursor=fact.dead_cursor),
        ),
        "cancelled": ("cancelled jobs, first page", _list(state=JobState.CANCELLED)),
        "queued": ("queued jobs, first page", _list(state=JobState.QUEUED)),
        "leased": ("leased jobs, first page", _list(state=JobState.LEASED)),
        "succeeded": ("succeeded jobs, first page", _list(state=JobState.SUCCEEDED)),
        "queue": ("the emails queue, first page", _list(queue="emails")),
        "type": ("jobs of type send_email, first page", _list(type="send_email")),
        "last-hour": (
            "jobs created in the last hour, first page",
            _list(created_after=f.now - timedelta(hours=1), created_before=f.now),
        ),
    }
    return {
        "JobInsert": [
            Case(
                "new",
                "a new job of the emails queue",
                lambda g: q.job_insert(params=_insert("emails", None)),
            ),
            Case(
                "replay",
                "a keyed job whose key is taken (the conflict path)",
                lambda g: q.job_insert(params=_insert("emails", fact.keyed_key)),
            ),
        ],
        "JobInsertNotify": [
            Case(
                "handoff",
                "a job of the default queue, offers standing",
                lambda g: q.job_insert_notify(params=_notify()),
            ),
        ],
        "JobInsertQueuedNotify": [
            Case(
                "queued",
                "a job of the default queue, queued without looking for an offer",
                lambda g: q.job_insert_queued_notify(params=_queued("default", None)),
            ),
            Case(
                "replay",
                "a keyed job whose key is taken (the conflict path)",
                lambda g: q.job_insert_queued_notify(params=_queued("emails", fact.keyed_key)),
            ),
        ],
        "JobInsertUnique": [
            Case(
                "fresh",
                "a job unique by account while queued or running, its key free",
                lambda g: uq.job_insert_unique(params=_unique()),
            ),
        ],
        "JobInsertDependent": [
            Case(
                "waiting",
                "a job depending on three queued jobs",
                lambda g: dq.job_insert_dependent(params=_dependent(g["ids"][:3])),
                setup=_queued_three,
            ),
        ],
        "JobSettleWaiting": [
            Case(
                "batch",
                "the first 1,000 waiting jobs",
                lambda g: dq.job_settle_waiting(
                    after_created=f.now - timedelta(days=3650),
                    after_id=UUID(int=0),
                    batch_size=1000,
                    channel="jobrun",
                ),
            ),
        ],
        "JobDependenciesOf": [
            Case(
                "none",
                "a queued job's (it has none)",
                lambda g: dq.job_dependencies_of(job_id=fact.queued_id, with_results=False),
            ),
            Case(
                "results",
                "a waiting job's two, with their results",
                lambda g: dq.job_dependencies_of(job_id=FIRST_WAITING, with_results=True),
            ),
        ],
        "JobStateCounts": [
            Case("all", "every state's count", lambda g: q.job_state_counts()),
        ],
        "JobInsertKeyed": [
            Case(
                "waiting",
                "a job of key customer:7 (whose slots are taken)",
                lambda g: cq.job_insert_keyed(params=_keyed("customer:7")),
            ),
        ],
        "JobAdmitKeyed": [
            Case(
                "full",
                "a key whose two slots are taken",
                lambda g: cq.job_admit_keyed(keys=["customer:7"], channel="jobrun"),
            ),
            Case(
                "room",
                "100 keys with room, one waiting job each",
                lambda g: cq.job_admit_keyed(
                    keys=[f"customer:{n}" for n in range(50_001, 50_101)], channel="jobrun"
                ),
            ),
        ],
        "JobConcurrencySettle": [
            Case(
                "batch",
                "the first 1,000 rows",
                lambda g: cq.job_concurrency_settle(after_id=UUID(int=0), batch_size=1000),
            ),
        ],
        "JobKeysWaiting": [
            Case(
                "batch",
                "the first 1,000 keys with waiting jobs",
                lambda g: cq.job_keys_waiting(after_key="", batch_size=1000),
            ),
        ],
        "JobWorkflowSteps": [
            Case(
                "waiting",
                "the workflow of a waiting job, up to 10,001 steps",
                lambda g: dq.job_workflow_steps(job_id=FIRST_WAITING, max_steps=10_001),
            ),
        ],
        "JobWorkflowEdges": [
            Case(
                "three",
                "the edges among a waiting job and its two dependencies",
                lambda g: dq.job_workflow_edges(job_ids=[FIRST_WAITING, fact.queued_id]),
            ),
        ],
        "JobGetUniqueHolder": [
            Case(
                "hourly",
                "the holder of a key of this hour",
                lambda g: uq.job_get_unique_holder(
                    unique_base="9f" * 32, period=timedelta(hours=1)
                ),
            ),
        ],
        "JobInsertKeyedMany": [
            Case(
                "batch",
                "100 keyed jobs of the emails queue",
                lambda g: q.job_insert_keyed_many(
                    params=jobs.JobInsertKeyedManyParams(
                        ids=[UUID(int=_NEW_ID.int + i) for i in range(100)],
                        queues=["emails"] * 100,
                        types=["send_email"] * 100,
                        payloads=[{"n": i} for i in range(100)],
                        priorities=[0] * 100,
                        max_attempts=[25] * 100,
                        backoff_kinds=[BackoffKind.EXPONENTIAL] * 100,
                        backoff_bases=[timedelta(seconds=1)] * 100,
                        backoff_maxes=[timedelta(hours=1)] * 100,
                        run_ats=[f.now] * 100,
                        idempotency_keys=keys,
                        created_at=f.now,
                        meta=None,
                    )
                ),
            )
        ],
        "JobGetByIdempotencyKey": [
            Case(
                "keyed",
                "a keyed job of the emails queue",
                lambda g: q.job_get_by_idempotency_key(
                    queue="emails", idempotency_key=fact.keyed_key
                ),
            )
        ],
        "JobGetByIdempotencyKeys": [
            Case(
                "batch",
                "100 keys of the emails queue",
                lambda g: q.job_get_by_idempotency_keys(
                    queues=["emails"] * 100, idempotency_keys=[fact.keyed_key, *keys[1:]]
                ),
            )
        ],
        "JobNotify": [
            Case(
                "wake",
                "wake the default queue",
                lambda g: q.job_notify(channel="jobrun", queue="default"),
            )
        ],
        "JobGet": [Case("by-id", "a succeeded job", lambda g: q.job_get(id=fact.succeeded_id))],
        "JobClaim": [
            Case(
                "busy",
                "10 jobs of the default queue (a due backlog)",
                lambda g: q.job_claim(params=_claim(["default"], 10)),
            ),
            Case(
                "limited",
                "10 jobs of reports, webhooks and billing (concurrency and rate limits)",
                lambda g: q.job_claim(params=_claim(["reports", "webhooks", "billing"], 10)),
            ),
            Case(
                "idle",
                "10 jobs of digests: every one delayed, none due",
                lambda g: q.job_claim(params=_claim(["digests"], 10)),
            ),
        ],
        "JobProgressRecord": [
            Case(
                "batch",
                f"the progress of {FENCE_BATCH} jobs this owner just leased",
                lambda g: pq.job_progress_record(
                    params=progress.JobProgressRecordParams(
                        ids=g["ids"],
                        attempts=g["attempts"],
                        fractions=[0.5] * len(g["ids"]),
                        messages=["halfway"] * len(g["ids"]),
                        owner=_FENCE_OWNER,
                    )
                ),
                setup=_lease_batch,
            )
        ],
        "JobProgressOf": [
            Case(
                "page",
                f"the progress of {FENCE_BATCH} running jobs (a page's leased ones)",
                lambda g: pq.job_progress_of(ids=g["ids"]),
                setup=_lease_batch,
            )
        ],
        "JobResultOf": [
            Case(
                "one",
                "one job's state and result, as Client.result reads it",
                lambda g: rq.job_result_of(id=g["ids"][0]),
                setup=_lease_batch,
            )
        ],
        "JobProgressPrune": [
            Case(
                "batch",
                "reports of ended attempts, 5,000 at a time",
                lambda g: pq.job_progress_prune(max_rows=5000),
            )
        ],
        "JobHeartbeat": [
            Case(
                "batch",
                f"{FENCE_BATCH} jobs this owner just leased (none of its jobs when analyzed)",
                lambda g: q.job_heartbeat(
                    params=jobs.JobHeartbeatParams(
                        lease=_LEASE,
                        ids=g["ids"],
                        attempts=g["attempts"],
                        owner=_FENCE_OWNER,
                        now=None,
                    )
                ),
                setup=_lease_batch,
            )
        ],
        "JobRecordOutcomes": [
            Case(
                "batch",
                f"{FENCE_BATCH} jobs this owner just leased, completed, one in ten with a result",
                lambda g: q.job_record_outcomes(
                    params=jobs.JobRecordOutcomesParams(
                        ids=g["ids"],
                        attempts=g["attempts"],
                        outcomes=[JobOutcome.COMPLETE] * len(g["ids"]),
                        details=[""] * len(g["ids"]),
                        delays=[timedelta(0)] * len(g["ids"]),
                        attempt_limits=[0] * len(g["ids"]),
                        owner=_FENCE_OWNER,
                        now=None,
                        jitter=0.1,
                        result_ids=g["ids"][::10],
                        result_values=['{"rows":12}'] * len(g["ids"][::10]),
                        channel="jobrun",
                    )
                ),
                setup=_lease_batch,
            )
        ],
        "JobReapExpired": [
            Case(
                "batch",
                "up to 100 expired leases",
                lambda g: q.job_reap_expired(now=None, max_jobs=100, jitter=0.1),
            )
        ],
        "JobCancel": [
            Case(
                "queued",
                "a queued job",
                lambda g: q.job_cancel(id=fact.queued_id, now=None, actor="ops"),
            ),
            Case(
                "leased",
                "a leased job (the cancel is requested)",
                lambda g: q.job_cancel(id=fact.leased_id, now=None, actor="ops"),
            ),
        ],
        "JobRetry": [
            Case(
                "dead", "a dead job", lambda g: q.job_retry(id=fact.dead_id, now=None, actor="ops")
            )
        ],
        "JobDeleteMany": [
            Case(
                "page",
                "a page of 50 dead jobs an operator deletes",
                lambda g: q.job_delete_many(ids=g["dead_ids"]),
                setup=_dead_page,
            )
        ],
        "JobRunNow": [
            Case("queued", "a queued job", lambda g: q.job_run_now(id=fact.queued_id, actor="ops"))
        ],
        "JobPurgeState": [
            Case(
                state.value,
                f"{state.value} jobs finished more than {age.days} day(s) ago, 1,000 at a time",
                _purge(q, state, age),
            )
            for state, age in (
                (JobState.SUCCEEDED, timedelta(days=1)),
                (JobState.CANCELLED, timedelta(days=7)),
                (JobState.DEAD, timedelta(days=14)),
            )
        ],
        "JobList": [
            Case(label, about, _listing(q, params)) for label, (about, params) in listing.items()
        ],
        "JobDepth": [Case("all", "every queue and state", lambda g: q.job_depth())],
        "JobQueueStats": [Case("all", "every queue", lambda g: q.job_queue_stats())],
    }
