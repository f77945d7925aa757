"""The claim's plan, read with EXPLAIN (ANALYZE, BUFFERS), for the benchmark and the plan tests.

The claim is the hottest query, and its cost must not follow the number of
delayed (queued, not yet due) jobs: a claim that finds fewer due jobs than it
wants would otherwise walk every delayed entry of the queue's claim index on
each poll. That property is a plan property, invisible to a test that only
checks which jobs come back, so the plan tests check it here: it fills a
queue with delayed jobs inside a transaction, runs the idle claim under
EXPLAIN (ANALYZE, BUFFERS), compares the buffers it read with a bound, and
rolls everything back. ``scripts/bench-claim`` reads the same figures at
scale.

The statements that act on leased jobs under the lease fence (recording
outcomes, heartbeats) have a plan property of their own: each job must be one
primary-key probe, even when the table's statistics were taken while no job
was leased, as they usually are. :func:`check_fenced_updates` checks that
the same way. Nothing here runs in a worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from jobrun.sqlc import jobs as job_queries
from jobrun.sqlc.models import JobOutcome, JobState
from jobrun_tools.sqlc import models as plan_models
from jobrun_tools.sqlc import plans as plan_queries

# Delayed jobs the vet check puts in one queue, over this many priorities.
CHECK_DELAYED = 50_000
CHECK_PRIORITIES = 4
# Buffers an idle claim of that queue may read. The loose index scan reads
# about two index descents per priority level (some 40 to 70 buffers here); a
# claim that walks the delayed entries reads one buffer per few dozen of them
# (the claim before the loose scan read some 740 for 50,000).
CHECK_MAX_BUFFERS = 150
# Text that only the claim's statement holds, to find it in pg_prepared_statements
# (which keeps the text as sent, placeholders rewritten, so not JOB_CLAIM itself).
_CLAIM_MARKER = "WITH RECURSIVE controls AS MATERIALIZED"
assert _CLAIM_MARKER in job_queries.JOB_CLAIM
# First id of the check's synthetic jobs; far from the uuid v7 ids jobrun mints.
_CHECK_FIRST_ID = 1 << 40
# The fenced-update check: jobs in its queue (analyzed while all are queued),
# and how many of them it leases, heartbeats and completes in one statement.
FENCE_CHECK_JOBS = 4_000
FENCE_CHECK_BATCH = 500
# The lease owner and lease of the checks' claims.
_OWNER = "claimplan"
_LEASE = timedelta(minutes=5)
# Scan nodes of the plan tree.
_SCANS = frozenset({"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan"})


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """What one EXPLAIN (ANALYZE, BUFFERS) of the claim measured."""

    plan: Mapping[str, Any]
    """The root node of the JSON plan."""
    execution_ms: float
    """The executor's time, planning excluded."""

    @property
    def buffers(self) -> int:
        """Shared buffers the execution touched (hit + read), the whole tree."""
        return int(self.plan.get("Shared Hit Blocks", 0)) + int(
            self.plan.get("Shared Read Blocks", 0)
        )

    def node_types(self) -> list[str]:
        """Every node type of the tree, depth first."""
        return [str(node["Node Type"]) for node in _walk(self.plan)]

    def seq_scanned(self) -> list[str]:
        """The relations the plan reads whole (Seq Scan nodes), depth first."""
        return [
            str(node.get("Relation Name"))
            for node in _walk(self.plan)
            if node["Node Type"] == "Seq Scan"
        ]


def _walk(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _walk(child)


async def explain_claim(
    conn: psycopg.AsyncConnection[Any],
    queues: Sequence[str],
    limit: int,
    *,
    now: datetime | None = None,
) -> ClaimPlan:
    """Run the claim under EXPLAIN (ANALYZE, BUFFERS) and undo it.

    The claim really runs (EXPLAIN ANALYZE executes it), so it runs in a
    transaction of its own that is rolled back: no job changes state.
    ``conn`` must not be inside a transaction it wants to keep.
    """
    params = {
        "queues": list(queues),
        "max_jobs": limit,
        "now": now,
        "owner": _OWNER,
        "lease": _LEASE,
        "offer_channel": None,
        "offer_lease": _LEASE,
        "offer_ttl": timedelta(0),
        "record_events": True,
    }
    top = await _explain_analyze(conn, "ANALYZE, BUFFERS", job_queries.JOB_CLAIM, params)
    return ClaimPlan(plan=top["Plan"], execution_ms=float(top["Execution Time"]))


async def _explain_analyze(
    conn: psycopg.AsyncConnection[Any], options: str, statement: str, params: Mapping[str, Any]
) -> Mapping[str, Any]:
    """EXPLAIN (``options``, FORMAT JSON) of a generated statement, rolled back; the top entry.

    The generated text itself, so the plan is that of the query the store
    runs; EXPLAIN cannot be a query of its own in db/query.
    """
    async with conn.transaction(force_rollback=True), conn.cursor() as cur:
        await cur.execute(f"EXPLAIN ({options}, FORMAT JSON) " + statement, params)
        row = await cur.fetchone()
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    top: Mapping[str, Any] = document[0]
    return top


async def link_waiting(conn: psycopg.AsyncConnection[Any], *, keys: int) -> int:
    """Give the waiting jobs concurrency keys and a dependency each (see JobFillWaitingLinks)."""
    return await plan_queries.AsyncQuerier(conn).job_fill_waiting_links(keys=keys)


async def fill_synthetic(
    conn: psycopg.AsyncConnection[Any],
    *,
    queue: str,
    total: int,
    first_id: int,
    state: JobState = JobState.QUEUED,
    priorities: int = 1,
    run_in: timedelta = timedelta(0),
    spacing: timedelta = timedelta(milliseconds=1),
    finished_at: datetime | None = None,
) -> int:
    """Insert ``total`` synthetic jobs in one statement (see JobFillSynthetic)."""
    return await plan_queries.AsyncQuerier(conn).job_fill_synthetic(
        params=plan_queries.JobFillSyntheticParams(
            first_id=first_id,
            queue=queue,
            priorities=priorities,
            state=plan_models.JobState(state.value),
            now=None,
            run_in=run_in,
            spacing=spacing,
            finished_at=finished_at,
            total=total,
        )
    )


async def analyze_jobs(conn: psycopg.AsyncConnection[Any]) -> None:
    """Refresh the planner's statistics of jobs."""
    await plan_queries.AsyncQuerier(conn).jobs_analyze()


@dataclass(frozen=True, slots=True)
class IdleClaimCheck:
    """The verdict of :func:`check_idle_claim`."""

    buffers: int
    bound: int
    node_types: list[str]

    @property
    def ok(self) -> bool:
        """True when the idle claim read no more than the bound."""
        return self.buffers <= self.bound


async def check_idle_claim(
    conn: psycopg.AsyncConnection[Any],
    *,
    delayed: int = CHECK_DELAYED,
    priorities: int = CHECK_PRIORITIES,
    bound: int = CHECK_MAX_BUFFERS,
) -> IdleClaimCheck:
    """Measure an idle claim of a queue holding ``delayed`` delayed jobs, and undo it all.

    The jobs, the statistics and the claim live in one transaction that is
    rolled back, so the check leaves the database as it found it. The queue
    name is unique to the check, so jobs already present do not count.
    """
    queue = "jobrun-vet-idle-claim"
    async with conn.transaction(force_rollback=True):
        await fill_synthetic(
            conn,
            queue=queue,
            total=delayed,
            first_id=_CHECK_FIRST_ID,
            priorities=priorities,
            run_in=timedelta(days=1),
        )
        await analyze_jobs(conn)
        # Read twice: the first execution also sets hint bits on the fresh rows.
        await _explain_nested(conn, queue)
        plan = await _explain_nested(conn, queue)
    return IdleClaimCheck(buffers=plan.buffers, bound=bound, node_types=plan.node_types())


async def _explain_nested(conn: psycopg.AsyncConnection[Any], queue: str) -> ClaimPlan:
    # Inside the caller's transaction explain_claim's block is a savepoint,
    # rolled back alone.
    return await explain_claim(conn, [queue], 10)


@dataclass(frozen=True, slots=True)
class ClaimPlanReuse:
    """How the claim's prepared statement was planned over repeated calls on one session."""

    generic_plans: int
    """Executions that reused the statement's generic plan."""
    custom_plans: int
    """Executions planned afresh with their values."""


async def claim_plan_reuse(
    conn: psycopg.AsyncConnection[Any], queues: Sequence[str], *, calls: int = 20
) -> ClaimPlanReuse:
    """Claim ``calls`` times with the store's statement, then read how PostgreSQL planned it.

    This runs through psycopg's cursor, which prepares a statement on its
    fifth execution (the store's lean path prepares it on the first);
    PostgreSQL then plans it with its values for five more and keeps a
    generic plan only if that plan does not look dearer. Planning the claim
    costs about as much as running it, so the claim must end up on its
    generic plan. Everything runs
    in a transaction that is rolled back; ``conn`` must be outside one and
    should be a fresh session (statements it prepared before count too).
    """
    queries = job_queries.AsyncQuerier(conn)
    params = _claim_params(queues, 10, record_events=True)
    async with conn.transaction(force_rollback=True):
        for _ in range(calls):
            await queries.job_claim(params=params)
        plans = [
            row
            for row in await plan_queries.AsyncQuerier(conn).prepared_statement_plans()
            if row.statement is not None and _CLAIM_MARKER in row.statement
        ]
    if len(plans) != 1:
        raise RuntimeError(
            f"expected the claim once among this session's prepared statements, found {plans}"
        )
    return ClaimPlanReuse(plans[0].generic_plans or 0, plans[0].custom_plans or 0)


def _claim_params(
    queues: Sequence[str], max_jobs: int, *, record_events: bool
) -> job_queries.JobClaimParams:
    """A plain claim (no handoff offer) of ``max_jobs`` from ``queues`` by the checks' owner."""
    return job_queries.JobClaimParams(
        queues=list(queues),
        max_jobs=max_jobs,
        now=None,
        owner=_OWNER,
        lease=_LEASE,
        offer_channel=None,
        offer_lease=_LEASE,
        offer_ttl=timedelta(0),
        record_events=record_events,
    )


@dataclass(frozen=True, slots=True)
class FencedUpdatePlan:
    """How one fenced statement (JobRecordOutcomes, JobHeartbeat) read jobs for a batch."""

    statement: str
    """The query's name in db/query/jobs.sql."""
    batch: int
    """Leased jobs the statement was given."""
    changed: int
    """Rows the statement returned (every one of the batch, when the fence holds)."""
    scans: list[str]
    """Every scan of jobs in the plan, as "Index Scan using jobs_pkey" and the like."""
    rows_discarded: int
    """Rows the plan's filters and join filters read and threw away, the whole tree."""

    @property
    def ok(self) -> bool:
        """True when every job of the batch was found by one primary-key probe."""
        return (
            self.changed == self.batch
            and bool(self.scans)
            and all(scan == "Index Scan using jobs_pkey" for scan in self.scans)
            and self.rows_discarded <= self.batch
        )


async def check_fenced_updates(
    conn: psycopg.AsyncConnection[Any],
    *,
    total: int = FENCE_CHECK_JOBS,
    batch: int = FENCE_CHECK_BATCH,
) -> list[FencedUpdatePlan]:
    """Heartbeat and complete a batch of leased jobs under EXPLAIN ANALYZE, and undo it all.

    ``total`` queued jobs go into a queue of the check's own and the table is
    analyzed while none is leased (what its statistics look like on most
    servers: leased jobs are few and short-lived); then ``batch`` of them are
    claimed and the heartbeat and the outcome recording run on them. A plan
    that trusts those statistics finds "one" leased row, drives the update
    from it and compares rows by the square of the batch. Everything runs in
    one transaction that is rolled back. ``conn`` must be outside a transaction.
    """
    queue = "jobrun-vet-fenced-updates"
    owner = _OWNER
    queries = job_queries.AsyncQuerier(conn)
    async with conn.transaction(force_rollback=True):
        await fill_synthetic(
            conn,
            queue=queue,
            total=total,
            first_id=_CHECK_FIRST_ID,
            run_in=-timedelta(hours=1),
        )
        await analyze_jobs(conn)
        claimed = await queries.job_claim(params=_claim_params([queue], batch, record_events=False))
        ids = [job.id for job in claimed]
        attempts = [job.attempts for job in claimed]
        heartbeat = await _explain_fenced(
            conn,
            "JobHeartbeat",
            job_queries.JOB_HEARTBEAT,
            {
                "ids": ids,
                "attempts": attempts,
                "owner": owner,
                "now": None,
                "lease": _LEASE,
            },
            len(ids),
        )
        outcomes = await _explain_fenced(
            conn,
            "JobRecordOutcomes",
            job_queries.JOB_RECORD_OUTCOMES,
            {
                "ids": ids,
                "attempts": attempts,
                "outcomes": [JobOutcome.COMPLETE] * len(ids),
                "details": [""] * len(ids),
                "delays": [timedelta(0)] * len(ids),
                "attempt_limits": [0] * len(ids),
                "owner": owner,
                "now": None,
                "jitter": 0.0,
                "result_ids": [],
                "result_values": [],
                "channel": "jobrun",
            },
            len(ids),
        )
    return [heartbeat, outcomes]


async def _explain_fenced(
    conn: psycopg.AsyncConnection[Any],
    name: str,
    statement: str,
    params: Mapping[str, Any],
    batch: int,
) -> FencedUpdatePlan:
    root = (await _explain_analyze(conn, "ANALYZE", statement, params))["Plan"]
    scans = [
        str(node["Node Type"]) + (f" using {node['Index Name']}" if "Index Name" in node else "")
        for node in _walk(root)
        if node["Node Type"] in _SCANS and node.get("Relation Name") == "jobs"
    ]
    discarded = sum(
        int(node.get("Rows Removed by Filter", 0)) + int(node.get("Rows Removed by Join Filter", 0))
        for node in _walk(root)
    )
    return FencedUpdatePlan(
        statement=name,
        batch=batch,
        changed=int(root.get("Actual Rows", 0)),
        scans=scans,
        rows_discarded=discarded,
    )
