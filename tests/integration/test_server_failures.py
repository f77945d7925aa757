"""The database's own failures under load: a server killed hard, a primary failed over,
a full disk.

Each test starts its own PostgreSQL (``own_servers``), two `jobrun worker
--scheduler` processes working jobs whose commit callback bumps a per-job
counter (``fault_app``), and a producer in the test enqueueing with an
idempotency key per job and retrying a key until an enqueue of it returns.
Then the server fails, and afterwards:

- every job the producer meant exists exactly once and succeeded: an enqueue
  that raised was retried under its key, and a retry of one that had
  committed found it;
- every effect committed exactly once (one counter row per job, at 1);
- no job is left leased, and the scheduler's leader fired again after the
  failure without firing one run twice;
- the workers kept running, logged no traceback, said each outage in one
  line and its end in one (no line per retry), and stopped cleanly.

These tests start servers of their own and ignore the shared test server,
so they run once: in the pass on the embedded server (no
``JOBRUN_TEST_DATABASE_URL``), which is also what ``scripts/test`` runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from jobrun import Client
from jobrun.domain import NewJob, NewSchedule
from jobrun.errors import DatabaseFull, JobrunError
from jobrun.testing import eventually

from .own_servers import LocalServer, missing_binaries, server_root, small_volume

HERE = Path(__file__).parent
JOBS = 1_200
FILLER_QUEUE = "fillers-unread"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing_binaries() is not None, reason=str(missing_binaries())),
    pytest.mark.skipif(
        bool(os.environ.get("JOBRUN_TEST_DATABASE_URL")),
        reason="starts servers of its own: runs once, in the pass without JOBRUN_TEST_DATABASE_URL",
    ),
]


@pytest.fixture
def root() -> Iterator[Path]:
    with server_root() as made:
        yield made


def start_worker(url: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop("JOBRUN_DATABASE_URL", None)
    return subprocess.Popen(
        [
            sys.executable, "-m", "jobrun", "worker", "--database-url", url,
            "--app", "fault_app", "--scheduler", "--concurrency", "20",
            "--lease", "5s", "--shutdown-grace", "5s", "--log-level", "info", *extra,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),  # a file: a full pipe nobody reads would block the worker
    )  # fmt: skip


def prepare(server: LocalServer) -> str:
    """Create the jobs database with jobrun's schema, the counters and a 1 s schedule."""
    server.execute("CREATE DATABASE jobs")
    url = server.url("jobs")
    subprocess.run(
        [sys.executable, "-m", "jobrun", "migrate", "--database-url", url],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    server.execute(
        "CREATE TABLE fault_counts (job_id uuid PRIMARY KEY, n int NOT NULL)", dbname="jobs"
    )
    return url


class Producer:
    """Enqueues jobs 0..JOBS-1 one by one, each under its own key, retrying a key until
    an enqueue of it returns; only JobrunError may come out of an enqueue.

    With ``fill``, it then goes on enqueueing fillers (into a queue no worker
    reads, each under its own key too) until :attr:`stopping` is set, so that it
    is still enqueueing when the test crashes the server, however fast the first
    part went.
    """

    def __init__(self, url: str, *, fill: bool = False) -> None:
        self.url = url
        self.fill = fill
        self.returned = 0
        self.refused = 0
        self.fillers = 0
        self.stopping = False

    async def run(self) -> None:
        async with Client(database_url=self.url) as client:
            for i in range(JOBS):
                while True:
                    try:
                        await client.enqueue(
                            NewJob(type="count", payload={"i": i}, idempotency_key=f"job-{i}")
                        )
                    except JobrunError:
                        self.refused += 1
                        continue
                    self.returned += 1
                    break
            while self.fill and not self.stopping:
                # A refused filler is retried under its key even once stopping:
                # it may have committed before its answer was lost.
                while True:
                    try:
                        await client.enqueue(
                            NewJob(
                                type="filler",
                                queue=FILLER_QUEUE,
                                idempotency_key=f"filler-{self.fillers}",
                            )
                        )
                    except JobrunError:
                        self.refused += 1
                        continue
                    self.fillers += 1
                    break


def count(url: str, query: str) -> int:
    """One number from the server, or -1 while it cannot answer."""
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            row = conn.execute(query.encode()).fetchone()
    except psycopg.OperationalError:
        return -1
    return int(row[0]) if row and row[0] is not None else 0


def succeeded(url: str) -> Callable[[], int]:
    return lambda: count(
        url, "SELECT count(*) FROM jobs WHERE type = 'count' AND state = 'succeeded'"
    )


async def progress_beyond(url: str, done: int) -> int:
    """Wait until more jobs than ``done`` have succeeded; return how many have."""
    return await eventually(
        lambda: max(0, succeeded(url)()) > done and succeeded(url)(),
        within=120,
        what=f"more than {done} jobs succeeded",
    )


async def schedule_ticks(url: str) -> None:
    """A schedule firing a ``tick`` job every second: the leader's work to watch."""
    async with Client(database_url=url) as client:
        await client.store.create_schedule(
            NewSchedule(name="tick", type="tick", every=timedelta(seconds=1))
        )


async def all_done_and_ticking_since(url: str, since_epoch: int) -> None:
    """Wait until every job succeeded and the schedule fired twice after ``since_epoch``."""
    ticks = (
        "SELECT count(*) FROM jobs WHERE type = 'tick' "
        f"AND created_at > to_timestamp({since_epoch})"
    )
    await eventually(
        lambda: succeeded(url)() == JOBS and count(url, ticks) >= 2,
        within=180,
        what="every job succeeded and the schedule fired after the failure",
    )


async def stop_producing(producing: asyncio.Task[None]) -> None:
    """Stop the producer if it still runs (a failed wait), leaving its counts as they are."""
    producing.cancel()
    with contextlib.suppress(asyncio.CancelledError, JobrunError):
        await producing


def check_accounting(url: str, since_epoch: int, jobs: int, failures: int) -> None:
    """Every job once and succeeded, every effect once, no lease left, the schedule firing
    again without a double, and no job run more than once more per server failure."""
    with psycopg.connect(url) as conn:
        per_key = conn.execute(
            b"SELECT count(DISTINCT idempotency_key), count(*) FROM jobs WHERE type = 'count'"
        ).fetchone()
        states = dict(
            conn.execute(
                b"SELECT state::text, count(*) FROM jobs WHERE type = 'count' GROUP BY 1"
            ).fetchall()
        )
        effects = conn.execute(
            b"SELECT count(*), count(*) FILTER (WHERE n <> 1) FROM fault_counts"
        ).fetchone()
        leased = conn.execute(b"SELECT count(*) FROM jobs WHERE state = 'leased'").fetchone()
        ticks = conn.execute(
            f"SELECT count(*), count(*) - count(DISTINCT idempotency_key) FROM jobs "
            f"WHERE type = 'tick' AND created_at > to_timestamp({since_epoch})".encode()
        ).fetchone()
        attempts = dict(
            conn.execute(
                b"SELECT attempts, count(*) FROM jobs WHERE type = 'count' GROUP BY 1"
            ).fetchall()
        )
    print(
        f"accounting: {jobs} meant, {per_key} (keys, rows), states {states}, "
        f"effects (rows, not once) {effects}, leased {leased}, ticks since (rows, doubled) "
        f"{ticks}, jobs by attempts {dict(sorted(attempts.items()))}"
    )
    assert per_key == (jobs, jobs), "every job meant exists exactly once"
    assert max(attempts) <= 1 + failures, attempts
    assert states == {"succeeded": jobs}
    assert effects == (jobs, 0), "every effect committed exactly once"
    assert leased == (0,)
    assert ticks is not None and ticks[0] >= 2 and ticks[1] == 0, ticks


def stop_workers(workers: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    for proc, log in zip(workers, logs, strict=True):
        assert proc.poll() is None, log.read_text()[-3000:]
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    for proc, log in zip(workers, logs, strict=True):
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]
        assert "Traceback" not in log.read_text(), log.read_text()[-3000:]


LOSS = "database unavailable, retrying until it answers"
RECOVERY = "database answers again after"


RETRIES = (
    "claim failed",
    "heartbeat failed",
    "reaper pass failed",
    "notifier: reconnect",
    "notifier: connection lost",
    "cannot try for leadership",
    "could not record",
    "psycopg.pool: error connecting",
    "psycopg.pool: discarding",
)
"""How the parts' retries and psycopg's lost connections read in the log: none may show."""


def check_outage_lines(logs: list[Path], outages: int, *, at_least: int = 1) -> None:
    """Each worker said each outage it saw in one line and its end in one, and nothing else of it.

    Outages close together may be one outage to a worker (a failure just
    after a recovery is taken for a connection the outage broke), so a
    worker says at most ``outages`` of them (and at least ``at_least``).
    """
    for log in logs:
        lines = log.read_text().splitlines()
        said = [line for line in lines if LOSS in line or RECOVERY in line]
        losses = [line for line in said if LOSS in line]
        retries = [line for line in lines if any(retry in line for retry in RETRIES)]
        print(
            f"{log.name}: {len(losses)} outage(s) said in {len(said)} lines "
            f"for {outages} server failure(s); {len(retries)} retry lines shown"
        )
        assert at_least <= len(losses) <= outages, said

        assert all(LOSS in line for line in said[::2]), said
        assert all(RECOVERY in line for line in said[1::2]), said
        assert len(said) == 2 * len(losses), "the last outage was said to end"
        assert retries == [], retries[:5]


def leaders_elected_again(logs: list[Path]) -> bool:
    """Whether the scheduler's and maintenance's leaders, whose locks died with the server,
    were elected again after it: some worker logged leading after its first outage line.

    A leader that lost its lock waits two of its retry periods before it tries
    again (maintenance's is 30 s), so this is waited for, not checked once.
    """
    for service in ("scheduler", "maintenance"):
        again = 0
        for log in logs:
            lines = log.read_text().splitlines()
            first_loss = next((i for i, line in enumerate(lines) if LOSS in line), len(lines))
            again += sum(f"{service}: leading" in line for line in lines[first_loss:])
        if not again:
            return False
    return True


async def test_a_server_killed_hard_under_load_loses_no_job_and_commits_no_effect_twice(
    root: Path,
) -> None:
    server = LocalServer(root, "server")
    server.initdb()
    server.start()
    try:
        url = prepare(server)
        await schedule_ticks(url)
        logs = [root / "worker-1.log", root / "worker-2.log"]
        workers = [start_worker(url, log) for log in logs]
        producer = Producer(url, fill=True)
        producing = asyncio.create_task(producer.run())
        try:
            await eventually(
                lambda: all("started on queues" in log.read_text() for log in logs),
                what="both workers started",
            )
            done = 0
            for _ in range(3):
                # Crash while jobs are enqueued, claimed and completed, then
                # restart: crash recovery replays the WAL.
                done = await progress_beyond(url, done + 100)
                server.crash()
                server.start()
            last_crash = count(url, "SELECT extract(epoch FROM now())::bigint")
            producer.stopping = True
            await asyncio.wait_for(producing, 300)
            await all_done_and_ticking_since(url, last_crash)
            await eventually(
                lambda: leaders_elected_again(logs),
                within=150,
                what="the scheduler's and maintenance's leaders elected after the failure",
            )
        finally:
            await stop_producing(producing)
            stop_workers(workers, logs)
        check_outage_lines(logs, 3)
        assert producer.returned == JOBS
        assert producer.refused > 0, "some enqueues met the crashed server"
        check_accounting(url, last_crash, JOBS, failures=3)
        fillers = count(
            url,
            "SELECT count(*) * 1000000 + count(DISTINCT idempotency_key) FROM jobs "
            f"WHERE queue = '{FILLER_QUEUE}'",
        )
        assert fillers == producer.fillers * 1_000_001, "each returned filler once, no other"
    finally:
        server.stop()


async def test_a_primary_failed_over_to_its_synchronous_standby_loses_nothing_committed(
    root: Path,
) -> None:
    primary = LocalServer(root, "primary")
    standby = LocalServer(root, "standby")
    primary.initdb()
    # On the command line, so the standby's copy of the configuration does
    # not make the promoted server wait for a standby of its own.
    primary.start("synchronous_standby_names='standby'")
    try:
        # The standby first: with it named synchronous, the primary's commits
        # wait for it.
        standby.make_standby_of(primary)
        standby.start()
        prepare(primary)
        await eventually(
            lambda: primary.execute("SELECT sync_state FROM pg_stat_replication") == [("sync",)],
            what="the standby streaming synchronously",
        )
        # One URL for both servers: libpq tries them in order and keeps the
        # one that accepts writes, so after the failover every new connection
        # (the pool's, the notifier's, the leaders' locks) finds the new primary.
        url = (
            f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/jobs"
            "?target_session_attrs=read-write&connect_timeout=2"
        )
        await schedule_ticks(url)
        logs = [root / "worker-1.log", root / "worker-2.log"]
        # Polls far apart: jobs enqueued after the failover are worked within
        # the wait below only if the workers listen again on the new primary.
        workers = [start_worker(url, log, "--poll", "60s") for log in logs]
        producer = Producer(url)
        producing = asyncio.create_task(producer.run())
        try:
            await eventually(
                lambda: all("started on queues" in log.read_text() for log in logs),
                what="both workers started",
            )
            await progress_beyond(url, 300)
            primary.crash()
            standby.promote()
            failed_over = count(url, "SELECT extract(epoch FROM now())::bigint")
            await asyncio.wait_for(producing, 300)
            await all_done_and_ticking_since(url, failed_over)
            await eventually(
                lambda: leaders_elected_again(logs),
                within=150,
                what="the scheduler's and maintenance's leaders elected after the failure",
            )
            # A wake-up on the new primary: well inside the 60 s poll.
            async with Client(database_url=url) as client:
                late = await client.enqueue(
                    NewJob(type="count", payload={"i": JOBS}, idempotency_key="job-late")
                )
            await eventually(
                lambda: (
                    count(
                        url,
                        f"SELECT count(*) FROM jobs WHERE id = '{late.id}' AND state = 'succeeded'",
                    )
                    == 1
                ),
                within=30,
                what="a job enqueued after the failover woke a worker",
            )
        finally:
            await stop_producing(producing)
            stop_workers(workers, logs)
        check_outage_lines(logs, 1)
        assert producer.returned == JOBS
        check_accounting(url, failed_over, JOBS + 1, failures=1)
        assert standby.execute("SELECT pg_is_in_recovery()") == [(False,)]
    finally:
        standby.stop()
        primary.stop()


async def test_a_full_disk_refuses_enqueues_clearly_and_everything_resumes_once_freed(
    root: Path,
) -> None:
    try:
        volume_cm = small_volume(root / "volume", 128)
        volume = volume_cm.__enter__()
    except (PermissionError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot mount a small volume here: {exc}")
    # The data on the small volume, the WAL on the big one: a full data volume
    # fails the statements that need a new page; a full WAL volume stops the
    # server, which the other tests cover.
    server = LocalServer(volume, "server")
    try:
        server.initdb(waldir=root / "wal")
        server.start()
        url = prepare(server)
        log = root / "worker.log"
        worker = start_worker(url, log)
        await eventually(lambda: "started on queues" in log.read_text(), what="worker started")
        ballast = volume / "ballast"
        free = os.statvfs(volume).f_bavail * os.statvfs(volume).f_frsize
        ballast.write_bytes(b"\0" * (free - 6 * 1024 * 1024))

        returned = 0
        refusal: JobrunError | None = None
        async with Client(database_url=url) as client:
            for i in range(100_000):
                try:
                    await client.enqueue(
                        NewJob(
                            type="count",
                            payload={"i": i, "pad": os.urandom(3000).hex()},
                            idempotency_key=f"job-{i}",
                        )
                    )
                except JobrunError as exc:
                    refusal = exc
                    break
                returned += 1
            assert isinstance(refusal, DatabaseFull), repr(refusal)
            assert "out of disk space" in str(refusal), str(refusal)
            assert (
                count(url, f"SELECT count(*) FROM jobs WHERE idempotency_key = 'job-{returned}'")
                == 0
            )
            ballast.unlink()
            # Space is back: the refused job goes in, and more after it.
            for i in range(returned, returned + 200):
                await client.enqueue(
                    NewJob(type="count", payload={"i": i}, idempotency_key=f"job-{i}")
                )
        total = returned + 200
        try:
            await eventually(
                lambda: succeeded(url)() == total, within=180, what="every job succeeded"
            )
        finally:
            stop_workers([worker], [log])
        # A worker may meet the full disk or not (claims that find pages with room succeed).
        check_outage_lines([log], 1, at_least=0)
        effects = count(url, "SELECT count(*) FROM fault_counts WHERE n = 1")
        assert effects == total
        assert count(url, "SELECT count(*) FROM jobs WHERE type = 'count'") == total
    finally:
        server.stop()
        volume_cm.__exit__(None, None, None)
