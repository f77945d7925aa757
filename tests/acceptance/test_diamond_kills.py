"""Diamonds of dependencies (top, then left and right, then bottom) run by three
``jobrun worker`` processes while one after another is killed with SIGKILL and
replaced: every step's effect commits once, every step runs after the steps it
waits for, and every dependent is released once. The negative control enqueues
the same steps without their dependencies, and the order check catches it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from typing import Any

import pytest
from tests.acceptance.test_cli_worker import ROOT

from jobrun import Client
from jobrun.domain import NewJob
from jobrun.testing import eventually

APP = "tests.acceptance.diamond_app"
DIAMONDS = 150
STEPS = 4 * DIAMONDS
KILLS = 3


def start_worker(db_url: str) -> subprocess.Popen[bytes]:
    """One worker with a short lease, so a killed one's jobs come back soon."""
    return subprocess.Popen(
        [sys.executable, "-m", "jobrun", "worker", "--app", APP, "--database-url", db_url,
         "--concurrency", "20", "--lease", "2s", "--heartbeat-every", "500ms",
         "--reap-every", "500ms"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


async def scalar(client: Client, sql: str) -> Any:
    async with client.pool.connection() as conn:
        row = await (await conn.execute(sql)).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("depends", [True, False], ids=["diamonds", "negative-control"])
async def test_diamonds_run_each_step_once_and_in_order_while_workers_are_killed(
    db_url: str, depends: bool
) -> None:
    async with Client(database_url=db_url) as client:
        async with client.pool.connection() as conn:
            await conn.execute(
                "CREATE TABLE diamond_effects (job_id uuid PRIMARY KEY, diamond int, step text,"
                " at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
        jobs: list[NewJob] = []

        def step(diamond: int, name: str, after: list[NewJob]) -> NewJob:
            return NewJob(
                type="diamond.step",
                payload={"diamond": diamond, "step": name},
                depends_on=[a.id for a in after] if depends else [],
            )

        for d in range(DIAMONDS):
            top = step(d, "top", [])
            left, right = step(d, "left", [top]), step(d, "right", [top])
            jobs += [top, left, right, step(d, "bottom", [left, right])]
        await client.enqueue_batch(jobs)

        procs = [start_worker(db_url) for _ in range(3)]
        kills = 0
        try:
            for k in range(1, KILLS + 1):
                threshold = STEPS * k // (KILLS + 2)

                async def past_threshold(threshold: int = threshold) -> bool:
                    done = await scalar(client, "SELECT count(*) FROM diamond_effects")
                    return done >= threshold

                await eventually(past_threshold, within=120, what=f"{threshold} effects")
                victim = procs.pop(random.randrange(len(procs)))
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                kills += 1
                procs.append(start_worker(db_url))

            async def all_succeeded() -> bool:
                left = await scalar(client, "SELECT count(*) FROM jobs WHERE state <> 'succeeded'")
                return left == 0

            await eventually(all_succeeded, within=180, what="every step succeeding")
        finally:
            for proc in procs:
                proc.kill()
                proc.wait()

        effects = await scalar(client, "SELECT count(*) FROM diamond_effects")
        # A step that ran before a step it waits for had finished (by effect time).
        out_of_order = await scalar(
            client,
            """
            SELECT count(*) FROM diamond_effects AS later
            JOIN diamond_effects AS earlier ON earlier.diamond = later.diamond
            WHERE (later.step IN ('left', 'right') AND earlier.step = 'top'
                   OR later.step = 'bottom' AND earlier.step IN ('left', 'right'))
              AND later.at <= earlier.at
            """,
        )
        released_twice = await scalar(
            client,
            "SELECT count(*) FROM (SELECT job_id FROM job_events WHERE kind = 'ready'"
            " GROUP BY job_id HAVING count(*) > 1) AS twice",
        )
        released = await scalar(client, "SELECT count(*) FROM job_events WHERE kind = 'ready'")
        retried = await scalar(client, "SELECT count(*) FROM jobs WHERE attempts > 1")
    print(f"kills {kills}, steps retried {retried}, released {released}, effects {effects}")
    assert kills == KILLS
    assert effects == STEPS  # every step's effect, each once (job_id is the key)
    assert released_twice == 0
    if depends:
        assert out_of_order == 0
        assert released == 3 * DIAMONDS  # left, right and bottom of each, once
    else:
        assert out_of_order > 0  # the check sees a bottom that did not wait
