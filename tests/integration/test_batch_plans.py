"""Plans of the worker's per-batch statements when many jobs are leased.

The outcome and heartbeat statements take a batch of job ids and check the
lease fence (state leased, owner, attempt, unexpired). Statistics gathered
while nothing was leased put the leased jobs at about one row, and with the
state written as a literal the planner then drove the update from a partial
index on leased jobs and rescanned the whole batch once per leased job: a
batch cost leased jobs times batch size (about 240 ms for 200 outcomes with 600
jobs leased, on the development machine). These tests reproduce those
statistics and require that no partial index on leased jobs drives these
statements, nor a scan of the whole table (the same statistics made the
planner drive the update from a sequential scan it believed found one row,
with the same square cost: 170 ms for a batch of 1,000): each job is one
primary-key probe, and a worker fleet's size never enters the cost of one
batch. jobrun_tools.claimplan.check_fenced_updates checks
the same under EXPLAIN ANALYZE.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from jobrun.domain import NewJob
from jobrun.postgres import Pool
from jobrun.postgres.store import Store
from jobrun.sqlc import jobs as job_queries

LEASE = timedelta(seconds=60)


def scans(plan: dict[str, Any]) -> list[tuple[str, str | None, str | None, int]]:
    """Every scan node of ``plan``: (node type, relation, index, plan rows)."""
    found = []
    if "Scan" in plan["Node Type"]:
        relation, index = plan.get("Relation Name"), plan.get("Index Name")
        found.append((plan["Node Type"], relation, index, plan["Plan Rows"]))
    for child in plan.get("Plans", []):
        found += scans(child)
    return found


async def leased_with_stale_statistics(pool: Pool) -> list[Any]:
    store = Store(pool)
    await store.enqueue_batch([NewJob(type="noop") for _ in range(3000)])
    async with pool.connection() as conn:
        await conn.execute("ANALYZE jobs")
    held = []
    for _ in range(3):
        held += await store.claim(["default"], "w", 200, LEASE)
    assert len(held) == 600
    return held


async def explain(pool: Pool, statement: str, params: dict[str, Any]) -> dict[str, Any]:
    async with pool.connection() as conn:
        cur = await conn.execute("EXPLAIN (FORMAT JSON) " + statement, params)
        row = await cur.fetchone()
    assert row is not None
    found = row[0] if isinstance(row[0], list) else json.loads(row[0])
    plan: dict[str, Any] = found[0]["Plan"]
    return plan


LEASED_INDEXES = {"jobs_leased_idx"}


def leased_index_scans(plan: dict[str, Any]) -> list[tuple[str, str | None, str | None, int]]:
    return [s for s in scans(plan) if s[1] == "jobs" and s[2] in LEASED_INDEXES]


def primary_key_probes_only(plan: dict[str, Any]) -> bool:
    on_jobs = [s for s in scans(plan) if s[1] == "jobs"]
    return bool(on_jobs) and all(s[:3] == ("Index Scan", "jobs", "jobs_pkey") for s in on_jobs)


async def test_recording_outcomes_probes_each_job_by_primary_key(pool: Pool) -> None:
    held = await leased_with_stale_statistics(pool)
    batch = held[:200]
    plan = await explain(
        pool,
        job_queries.JOB_RECORD_OUTCOMES,
        {
            "ids": [j.id for j in batch],
            "attempts": [j.attempts for j in batch],
            "outcomes": ["complete"] * len(batch),
            "details": [""] * len(batch),
            "delays": [timedelta(0)] * len(batch),
            "attempt_limits": [0] * len(batch),
            "owner": "w",
            "jitter": 0.1,
            "now": None,
            # One in ten returns a result: its insert reads no table of jobs'.
            "result_ids": [j.id for j in batch[::10]],
            "result_values": ['{"rows":1}'] * len(batch[::10]),
            "channel": "jobrun",
        },
    )
    assert leased_index_scans(plan) == [], scans(plan)
    assert primary_key_probes_only(plan), [s for s in scans(plan) if s[1] == "jobs"]


async def test_heartbeat_probes_each_job_by_primary_key(pool: Pool) -> None:
    held = await leased_with_stale_statistics(pool)
    plan = await explain(
        pool,
        job_queries.JOB_HEARTBEAT,
        {
            "ids": [j.id for j in held],
            "attempts": [j.attempts for j in held],
            "owner": "w",
            "lease": LEASE,
            "now": None,
        },
    )
    assert leased_index_scans(plan) == [], scans(plan)
    assert primary_key_probes_only(plan), scans(plan)
