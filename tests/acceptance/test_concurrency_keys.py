"""Per-key concurrency across four ``jobrun worker`` processes: sampled every 10 ms,
no key ever has more than its limit of jobs leased, and the keys with few jobs
finish while the busy key still has jobs waiting (no head-of-line blocking).
The negative control enqueues the same jobs without a key, and the sampler
sees the busy key past the limit."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from tests.acceptance.test_cli import jobrun
from tests.acceptance.test_cli_worker import ROOT

from jobrun import Client
from jobrun.domain import NewJob

APP = "tests.acceptance.keys_app"
LIMIT = 2
BUSY = 120  # jobs of the busy key
QUIET_KEYS, QUIET = 8, 6  # keys with few jobs, and how many each


def start(db_url: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "jobrun", "worker", "--app", APP, "--database-url", db_url,
         "--concurrency", "10"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


@contextmanager
def workers(db_url: str, count: int) -> Iterator[None]:
    """``count`` worker processes, output discarded, stopped by SIGTERM."""
    procs = [start(db_url) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


LEASED_PER_KEY = """
SELECT payload->>'key', count(*) FROM jobs WHERE state = 'leased' GROUP BY 1
"""


async def scalar(client: Client, sql: str) -> Any:
    async with client.pool.connection() as conn:
        row = await (await conn.execute(sql)).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize("limited", [True, False], ids=["limited", "negative-control"])
async def test_no_key_runs_past_its_limit_and_other_keys_keep_flowing(
    db_url: str, limited: bool
) -> None:
    def job(key: str) -> NewJob:
        if not limited:
            return NewJob(type="keys.work", payload={"key": key})
        return NewJob(
            type="keys.work", payload={"key": key}, concurrency_key=key, concurrency_limit=LIMIT
        )

    # The busy key's jobs first, so a queue blocked by its head would show it.
    jobs = [job("busy") for _ in range(BUSY)]
    jobs += [job(f"quiet-{k}") for k in range(QUIET_KEYS) for _ in range(QUIET)]
    async with Client(database_url=db_url) as client:
        async with client.pool.connection() as conn:
            await conn.execute("CREATE TABLE keys_effects (job_id uuid PRIMARY KEY, key text)")
        await client.enqueue_batch(jobs)
        most: dict[str, int] = {}
        busy_left_when_quiet_done: int | None = None
        samples = 0
        with workers(db_url, 4):
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 180
            while loop.time() < deadline:
                async with client.pool.connection() as conn:
                    rows = await (await conn.execute(LEASED_PER_KEY)).fetchall()
                samples += 1
                for key, n in rows:
                    most[key] = max(most.get(key, 0), n)
                if busy_left_when_quiet_done is None:
                    quiet_done = await scalar(
                        client, "SELECT count(*) FROM keys_effects WHERE key <> 'busy'"
                    )
                    if quiet_done == QUIET_KEYS * QUIET:
                        busy_left_when_quiet_done = BUSY - await scalar(
                            client, "SELECT count(*) FROM keys_effects WHERE key = 'busy'"
                        )
                done = await scalar(client, "SELECT count(*) FROM keys_effects")
                if done == len(jobs):
                    break
                await asyncio.sleep(0.01)  # the sampling interval
        effects = await scalar(client, "SELECT count(*) FROM keys_effects")
    print(f"samples {samples}, most leased per key {most}, "
          f"busy jobs left when the quiet keys were done {busy_left_when_quiet_done}")  # fmt: skip
    assert effects == len(jobs)  # every job ran, once
    if limited:
        assert max(most.values()) <= LIMIT
        assert most["busy"] == LIMIT  # the limit was reached, so the check had teeth
        # The quiet keys finished while the busy key still had most of its jobs to run.
        assert busy_left_when_quiet_done is not None and busy_left_when_quiet_done > BUSY // 2
    else:
        assert most["busy"] > LIMIT


def test_the_cli_enqueues_with_a_key_and_says_when_a_job_waits(db_url: str) -> None:
    args = ["enqueue", "keys.work", "--database-url", db_url, "--payload", '{"key": "k"}']
    keyed = [*args, "--concurrency-key", "customer:7", "--concurrency-limit", "1"]
    first, second = jobrun(*keyed), jobrun(*keyed)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "waiting" not in first.stderr
    assert "waiting: concurrency key 'customer:7' is at its limit" in second.stderr
    no_limit = jobrun(*args, "--concurrency-key", "customer:7")
    assert no_limit.returncode == 2 and "concurrency_limit" in no_limit.stderr
    no_key = jobrun(*args, "--concurrency-limit", "2")
    assert no_key.returncode == 2, no_key.stdout
    assert "concurrency_limit needs a concurrency_key" in no_key.stderr
    zero = jobrun(*args, "--concurrency-key", "customer:7", "--concurrency-limit", "0")
    assert zero.returncode == 2 and "concurrency_limit" in zero.stderr
    listed = jobrun("jobs", "list", "--database-url", db_url, "--state", "waiting")
    assert second.stdout.strip() in listed.stdout and first.stdout.strip() not in listed.stdout


def test_the_cli_sets_a_queues_limit_per_key(db_url: str) -> None:
    args = ["--database-url", db_url]
    keyed = ["enqueue", "keys.work", *args, "--queue", "billing", "--concurrency-key", "c:1"]
    refused = jobrun(*keyed)
    assert refused.returncode == 2 and "--per-key" in refused.stderr
    limited = jobrun("queues", "limit", "billing", "--per-key", "1", *args)
    assert limited.returncode == 0 and "1 per concurrency key" in limited.stdout
    first, second = jobrun(*keyed), jobrun(*keyed)
    assert first.returncode == 0 and "waiting" in second.stderr
    row = next(line for line in jobrun("queues", "list", *args).stdout.splitlines()
               if " billing " in line)  # fmt: skip
    assert row.split("│")[-2].strip() == "1"  # the last column: per key
    zero = jobrun("queues", "limit", "billing", "--per-key", "0", *args)
    assert zero.returncode == 2 and "limit per key must be between 1" in zero.stderr
