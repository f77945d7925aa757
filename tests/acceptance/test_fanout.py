"""A fan-out of 1,000 jobs and a fan-in that depends on all of them, run by two
``jobrun worker`` processes: the fan-in runs once, after every part ended, and
sees every outcome. The same fan-in without the dependency (the negative
control) runs before the parts are done."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests.acceptance.test_cli_worker import ROOT

from jobrun import Client
from jobrun.domain import JobState, NewJob, group
from jobrun.testing import eventually

APP = "tests.acceptance.fanout_app"
PARTS = 1000
FAILING = 50


@contextmanager
def workers(db_url: str) -> Iterator[None]:
    """``jobrun worker --processes 2``, its output discarded (a pipe nobody reads
    would fill and stop it), stopped by SIGTERM, which the supervisor passes on."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrun", "worker", "--app", APP, "--database-url", db_url,
         "--concurrency", "50", "--processes", "2"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def fan_in_rows(client: Client) -> list[Any]:
    async with client.pool.connection() as conn:
        cur = await conn.execute("SELECT job_id, succeeded, ended, total FROM fan_in_runs")
        return list(await cur.fetchall())


@pytest.mark.parametrize("depends", [True, False], ids=["fan-in", "negative-control"])
async def test_a_fan_in_runs_once_after_every_part_with_every_outcome(
    db_url: str, depends: bool
) -> None:
    async with Client(database_url=db_url) as client:
        async with client.pool.connection() as conn:
            await conn.execute("CREATE TABLE fan_effects (job_id uuid PRIMARY KEY)")
            await conn.execute(
                "CREATE TABLE fan_in_runs (job_id uuid, succeeded int, ended int, total int)"
            )
        parts = [
            NewJob(type="fan.part", payload={"fail": i < FAILING}, max_attempts=1)
            for i in range(PARTS)
        ]
        ids = [str(p.id) for p in parts]
        fan_in = NewJob(
            type="fan.in",
            payload={"parts": ids},
            priority=-1,  # would run first, were it not waiting
            depends_on=[p.id for p in parts] if depends else [],
            if_dependency_fails="run",
        )
        await client.enqueue_batch([*parts, fan_in])
        with workers(db_url):

            async def all_ended() -> bool:
                done = await client.store.get(fan_in.id)
                return done.state is JobState.SUCCEEDED

            # Its row commits with its completion: once it succeeded, the row is there.
            await eventually(all_ended, within=120, what="the fan-in succeeding")
        rows = await fan_in_rows(client)
        async with client.pool.connection() as conn:
            effects = (await (await conn.execute("SELECT count(*) FROM fan_effects")).fetchone())[0]  # type: ignore[index]
    assert len(rows) == 1  # the fan-in ran once
    (_, succeeded, ended, _) = rows[0]
    if depends:
        assert (succeeded, ended) == (PARTS - FAILING, PARTS)
        assert effects == PARTS - FAILING  # every part's effect once
    else:
        assert ended < PARTS  # ran before the parts were done


async def test_a_groups_callback_runs_once_after_every_part_and_reads_every_outcome(
    db_url: str,
) -> None:
    """The same fan-out built with ``group``: the callback reads its 1,000 parts'
    outcomes and results through ``ctx.dependencies()``, once, after all ended."""
    async with Client(database_url=db_url) as client:
        async with client.pool.connection() as conn:
            await conn.execute("CREATE TABLE fan_effects (job_id uuid PRIMARY KEY)")
            await conn.execute(
                "CREATE TABLE fan_in_runs (job_id uuid, succeeded int, ended int, total int)"
            )
        parts = [
            NewJob(type="fan.part", payload={"n": i, "fail": i < FAILING}, max_attempts=1)
            for i in range(PARTS)
        ]
        jobs = group(parts, then=NewJob(type="fan.report", priority=-1))
        await client.enqueue_batch(jobs)
        with workers(db_url):

            async def callback_succeeded() -> bool:
                return (await client.store.get(jobs[-1].id)).state is JobState.SUCCEEDED

            await eventually(callback_succeeded, within=120, what="the group's callback")
        rows = await fan_in_rows(client)
    expected_total = sum(range(FAILING, PARTS))  # the parts that succeeded return their n
    assert [row[1:] for row in rows] == [(PARTS - FAILING, PARTS, expected_total)]
