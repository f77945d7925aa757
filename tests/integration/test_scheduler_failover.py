"""Scheduler failover between real processes: kill -9 the leader, another leads in time."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from jobrun.domain import NewSchedule
from jobrun.postgres import Pool

pytest.importorskip("jobrun.postgres.store")
from jobrun.postgres.store import Store

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("scheduler_process.py")
SRC = Path(__file__).resolve().parents[2] / "src"
RETRY = 1.0
TICK = 0.2
PROBE = 0.2
# The documented bound is one retry period after the leader's connection dies;
# the server notices a killed process's socket at once. Slack covers a connect.
FAILOVER_BOUND = RETRY + 1.0


@dataclass
class Proc:
    process: asyncio.subprocess.Process
    roles: list[tuple[float, str]] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def role(self) -> str | None:
        return self.roles[-1][1] if self.roles else None


async def _follow(proc: Proc) -> None:
    assert proc.process.stdout is not None
    loop = asyncio.get_running_loop()
    while line := await proc.process.stdout.readline():
        word = line.decode().split()[0]
        proc.roles.append((loop.time(), word))


@contextlib.asynccontextmanager
async def schedulers(db_url: str, n: int, key: int) -> AsyncIterator[list[Proc]]:
    procs: list[Proc] = []
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    try:
        for _ in range(n):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(SCRIPT),
                db_url,
                str(key),
                str(RETRY),
                str(TICK),
                str(PROBE),
                stdout=asyncio.subprocess.PIPE,
                env=env,
            )
            proc = Proc(process)
            proc.reader = asyncio.create_task(_follow(proc))
            procs.append(proc)
        yield procs
    finally:
        for proc in procs:
            if proc.process.returncode is None:
                proc.process.send_signal(signal.SIGKILL)
            await proc.process.wait()
            if proc.reader is not None:
                await proc.reader


async def wait_role(procs: list[Proc], role: str, within: float) -> Proc:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        for proc in procs:
            if proc.role == role and proc.process.returncode is None:
                return proc
        await asyncio.sleep(0.01)
    raise AssertionError(f"no process became {role} within {within}s")


async def jobs_per_key(db_url: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT idempotency_key, count(*) FROM jobs"
            " WHERE idempotency_key LIKE 'sched:%%' GROUP BY idempotency_key"
        )
        return {str(k): int(c) for k, c in await cur.fetchall()}


async def test_kill_9_leader_hands_over_within_documented_time(db_url: str, pool: Pool) -> None:
    await Store(pool).create_schedule(
        NewSchedule(name="heartbeat", type="ping", every=timedelta(seconds=1))
    )
    key = uuid.uuid4().int >> 65
    loop = asyncio.get_running_loop()
    async with schedulers(db_url, 2, key) as procs:
        leader = await wait_role(procs, "LEADER", 30)
        follower = next(p for p in procs if p is not leader)
        await asyncio.sleep(1.5)
        before = await jobs_per_key(db_url)
        assert before, "the leader materialised nothing"

        os.kill(leader.pid, signal.SIGKILL)
        killed_at = loop.time()
        await leader.process.wait()

        await wait_role([follower], "LEADER", FAILOVER_BOUND + 5)
        took_over_at = next(t for t, role in follower.roles if role == "LEADER")
        assert took_over_at - killed_at < FAILOVER_BOUND

        # The new leader keeps the schedule going, and no run was made twice.
        await asyncio.sleep(2.0)
        after = await jobs_per_key(db_url)
        assert len(after) > len(before)
        assert set(after.values()) == {1}
