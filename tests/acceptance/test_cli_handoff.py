"""Handoff through ``jobrun worker`` as a process: the idle worker gets the job in the enqueue.

An idle ``jobrun worker`` offers its free slots; ``jobrun enqueue`` then leases
the job to it in the enqueue's own statement, and the worker starts it from the
notification without claiming. These tests run both commands as users run
them and read the outcome from the database: the events say who held the job
at which attempt, and the offers table says what the worker still offers.
They also kill a worker that had offered slots, and overload one, to show a
handed job is never lost and never charged an attempt it did not run.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from tests.acceptance.test_cli_worker import (
    ROOT,
    enqueue,
    wait_for_line,
    wait_for_trace,
    worker,
)

from jobrun import Client, NewJob
from jobrun.postgres import SyncProducer
from jobrun.testing import eventually_sync


def offers(db_url: str) -> list[tuple[str, str, int]]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT owner, queue, slots FROM worker_offers WHERE expires_at > now()"
            " ORDER BY queue, owner"
        ).fetchall()
    return [(r[0], r[1], r[2]) for r in rows]


def wait_for_offers(db_url: str, count: int = 1, timeout: float = 20) -> list[tuple[str, str, int]]:
    def enough() -> list[tuple[str, str, int]] | None:
        found = offers(db_url)
        return found if len(found) >= count else None

    return eventually_sync(enough, within=timeout, what=f"{count} workers offering slots")


def events(db_url: str, job_id: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(
            "SELECT kind, attempt, owner, at FROM job_events WHERE job_id = %s ORDER BY id",
            (job_id,),
        ).fetchall()


def job_state(db_url: str, job_id: str) -> tuple[str, int]:
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT state::text, attempts FROM jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row is not None
    return row[0], row[1]


def wait_for_state(db_url: str, job_id: str, state: str, timeout: float = 30) -> tuple[str, int]:
    def there() -> tuple[str, int] | None:
        found = job_state(db_url, job_id)
        return found if found[0] == state else None

    return eventually_sync(there, within=timeout, what=f"job {job_id} {state}")


def test_an_idle_cli_worker_runs_the_job_its_enqueue_handed_to_it(
    db_url: str, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    # A minute's poll: a job that reached the worker any way but the handoff
    # or a wake-up claim would sit for a minute.
    with worker(db_url, "--poll", "60s", "--concurrency", "4") as proc:
        wait_for_line(proc, "started on queues")
        ((owner, queue, slots),) = wait_for_offers(db_url)
        assert (queue, slots) == ("default", 4)
        job_id = enqueue(db_url, "mark", {"trace": str(trace)})
        (start,) = wait_for_trace(trace, 1, timeout=20)
        assert start[1:3] == [job_id, "1"]
        assert wait_for_state(db_url, job_id, "succeeded") == ("succeeded", 1)
        kinds = events(db_url, job_id)
        assert [(k, a, o) for k, a, o, _ in kinds] == [
            ("enqueued", 0, None),
            ("claimed", 1, owner),
            ("succeeded", 1, owner),
        ]
        # Leased by the enqueue itself, in the same statement, not by a claim.
        assert kinds[0][3] == kinds[1][3]
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert offers(db_url) == []  # a stopping worker withdraws what it offered


def test_a_job_handed_to_a_killed_worker_runs_on_another_without_losing_an_attempt(
    db_url: str, tmp_path: Path
) -> None:
    trace = tmp_path / "trace"
    with worker(db_url, "--lease", "3s", "--poll", "5s") as first:
        wait_for_line(first, "started on queues")
        ((dead_owner, _, _),) = wait_for_offers(db_url)
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
    # The offer outlives the process for a few seconds; this enqueue takes it.
    job_id = cli_enqueue(db_url, "mark", {"trace": str(trace)}, "--max-attempts", "1")
    assert job_state(db_url, job_id) == ("leased", 1)
    with worker(db_url, "--poll", "200ms") as second:
        wait_for_line(second, "started on queues")
        (start,) = wait_for_trace(trace, 1, timeout=40)
        # Its only attempt: the dead worker never ran it, so nothing was spent.
        assert start[1:3] == [job_id, "1"]
        assert wait_for_state(db_url, job_id, "succeeded") == ("succeeded", 1)
        second.send_signal(signal.SIGTERM)
        _, stderr = second.communicate(timeout=30)
    assert second.returncode == 0, stderr
    kinds = [(k, a, o) for k, a, o, _ in events(db_url, job_id)]
    assert kinds[:3] == [("enqueued", 0, None), ("claimed", 1, dead_owner), ("reaped", 0, None)]
    assert [k for k, _, _ in kinds[3:]] == ["claimed", "succeeded"]
    assert kinds[3][2] != dead_owner


def test_a_worker_with_no_free_slot_gives_a_handed_job_back_and_runs_it_later(
    db_url: str, tmp_path: Path
) -> None:
    # One slot, two queues: each queue's offer promises the same slot. The
    # first job takes it for two seconds; the second, handed in meanwhile,
    # must not run beside it: it is given back, attempt uncounted, and claimed
    # once the slot is free.
    slow, quick = tmp_path / "slow", tmp_path / "quick"
    # An offer lasts twice the poll interval plus a second from the last
    # claim, and a worker whose one slot is busy does not claim: with 200 ms
    # the offer of queue b ran out (1.4 s) before a slow `jobrun enqueue` on a
    # loaded machine reached it, and the second job was never handed. 2 s
    # polls keep it 5 s; the slot's release, not the poll, starts the claim
    # that runs the job given back.
    with worker(
        db_url, "--queue", "a", "--queue", "b", "--concurrency", "1", "--poll", "2s"
    ) as proc:
        wait_for_line(proc, "started on queues")
        wait_for_offers(db_url, count=2)
        first = cli_enqueue(db_url, "stubborn", {"trace": str(slow), "sleep": 2}, "-q", "a")
        wait_for_trace(slow, 1, timeout=20)
        second = cli_enqueue(db_url, "mark", {"trace": str(quick)}, "-q", "b")
        (slow_start, slow_end) = wait_for_trace(slow, 2, timeout=20)
        (quick_start,) = wait_for_trace(quick, 1, timeout=20)
        assert float(quick_start[3]) >= float(slow_end[3])  # never both at once
        assert wait_for_state(db_url, second, "succeeded") == ("succeeded", 1)
        assert wait_for_state(db_url, first, "succeeded") == ("succeeded", 1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    handed_back = events(db_url, second)
    assert [(k, a) for k, a, _, _ in handed_back] == [
        ("enqueued", 0),
        ("claimed", 1),
        ("released", 0),
        ("claimed", 1),
        ("succeeded", 1),
    ]
    assert slow_start[2] == "1"


def cli_enqueue(db_url: str, job_type: str, payload: dict[str, object], *options: str) -> str:
    """``jobrun enqueue`` as a user runs it; the new job's id."""
    result = subprocess.run(
        [
            sys.executable, "-m", "jobrun", "enqueue", job_type,
            "--payload", json.dumps(payload), "--database-url", db_url, *options,
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_no_handoff_makes_every_job_wait_for_a_claim(db_url: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    with worker(db_url, "--no-handoff", "--poll", "60s") as proc:
        wait_for_line(proc, "started on queues")
        # A first job run proves claims have come and gone (the one that took
        # it left free slots, which a worker with handoff on would offer).
        warm_up = tmp_path / "warm-up"
        enqueue(db_url, "mark", {"trace": str(warm_up)})
        wait_for_trace(warm_up, 1, timeout=20)
        assert offers(db_url) == []
        job_id = enqueue(db_url, "mark", {"trace": str(trace)})
        wait_for_trace(trace, 1, timeout=20)  # woken by the queue's notification
        assert wait_for_state(db_url, job_id, "succeeded") == ("succeeded", 1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    enqueued, claimed, _ = events(db_url, job_id)
    assert (enqueued[0], claimed[0]) == ("enqueued", "claimed")
    assert claimed[3] > enqueued[3]  # claimed by the worker afterwards, not in the enqueue


def test_every_child_of_processes_offers_its_own_slots(db_url: str, tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    with worker(db_url, "--processes", "2", "--concurrency", "3", "--poll", "60s") as proc:
        found = wait_for_offers(db_url, count=2, timeout=60)
        assert len({owner for owner, _, _ in found}) == 2
        assert {(queue, slots) for _, queue, slots in found} == {("default", 3)}
        job_id = enqueue(db_url, "mark", {"trace": str(trace)})
        wait_for_trace(trace, 1, timeout=20)
        kinds = events(db_url, job_id)
        assert kinds[1][0] == "claimed" and kinds[1][3] == kinds[0][3]  # handed
        assert kinds[1][2] in {owner for owner, _, _ in found}
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert offers(db_url) == []


def test_a_job_too_wide_to_hand_off_is_enqueued_and_run_while_a_worker_is_idle(
    db_url: str, tmp_path: Path
) -> None:
    # {"p": [1e-40] * 220} is 1.3 kB of JSON, but jsonb writes each number out
    # in full: handed to the idle worker, the job would travel as some 9.7 kB,
    # over the 8000 bytes a notification holds. Each way a producer enqueues
    # it must store it, wake the worker the plain way, and see it run.
    trace = tmp_path / "trace"
    payload: dict[str, object] = {"trace": str(trace), "p": [1e-40] * 220}

    async def with_client() -> str:
        async with Client(database_url=db_url) as client:
            return str((await client.enqueue(NewJob(type="mark", payload=payload))).id)

    def with_sync_producer() -> str:
        with SyncProducer(db_url) as producer:
            return str(producer.enqueue(NewJob(type="mark", payload=payload)).id)

    with worker(db_url, "--poll", "60s", "--concurrency", "4") as proc:
        wait_for_line(proc, "started on queues")
        made = []
        for produce in (
            lambda: cli_enqueue(db_url, "mark", payload),
            lambda: asyncio.run(with_client()),
            with_sync_producer,
        ):
            wait_for_offers(db_url)  # the worker is idle and offers its slots
            made.append(produce())
        starts = wait_for_trace(trace, 3, timeout=20)
        assert sorted(start[1] for start in starts) == sorted(made)
        for job_id in made:
            assert wait_for_state(db_url, job_id, "succeeded") == ("succeeded", 1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    with psycopg.connect(db_url) as conn:
        stored = conn.execute(
            "SELECT payload FROM jobs WHERE id = ANY(%s::uuid[])", (made,)
        ).fetchall()
    assert [row[0] for row in stored] == [payload] * 3


@contextmanager
def login_role(db_url: str) -> Iterator[tuple[str, str]]:
    """A role of its own (name, connection string), to refuse its new connections at will."""
    role = f"jobrun_listener_{secrets.token_hex(4)}"
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN SUPERUSER").format(sql.Identifier(role)))
    try:
        yield role, make_conninfo(db_url, user=role)
    finally:
        with psycopg.connect(db_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_a_job_handed_to_a_worker_whose_listener_just_dropped_runs_on_another_long_before_its_lease(
    db_url: str, tmp_path: Path
) -> None:
    # The first worker's listening connection is killed, and kept from coming
    # back, right as an enqueue hands it a job: the notification is lost. The
    # job must not wait out that worker's 60 s lease (plus a reaper pass): its
    # unconfirmed handoff lasts a few seconds, then the second worker runs it,
    # the attempt not counted.
    trace = tmp_path / "trace"
    with (
        login_role(db_url) as (role, first_url),
        worker(first_url, "--lease", "60s", "--poll", "60s") as first,
    ):
        wait_for_line(first, "started on queues")
        ((first_owner, _, _),) = wait_for_offers(db_url)
        with worker(db_url, "--no-handoff", "--poll", "200ms") as second:
            wait_for_line(second, "started on queues")
            with psycopg.connect(db_url, autocommit=True) as admin:
                admin.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(role)))
                (listening,) = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE usename = %s"
                    " AND datname = current_database() AND application_name = 'jobrun-notifier'",
                    (role,),
                ).fetchall()
                ended = admin.execute("SELECT pg_terminate_backend(%s, 10000)", listening)
                assert ended.fetchone() == (True,)
                job_id = cli_enqueue(db_url, "mark", {"trace": str(trace)})
                handed = events(db_url, job_id)[1]
                assert (handed[0], handed[2]) == ("claimed", first_owner)  # to the deaf worker
                (start,) = wait_for_trace(trace, 1, timeout=40)
                assert wait_for_state(db_url, job_id, "succeeded") == ("succeeded", 1)
                admin.execute(sql.SQL("ALTER ROLE {} LOGIN").format(sql.Identifier(role)))
            second.send_signal(signal.SIGTERM)
            _, stderr = second.communicate(timeout=30)
            assert second.returncode == 0, stderr
        first.send_signal(signal.SIGTERM)
        _, stderr = first.communicate(timeout=30)
        assert first.returncode == 0, stderr
    assert start[1:3] == [job_id, "1"]  # its first attempt: the lost handoff cost none
    kinds = events(db_url, job_id)
    assert [(k, a) for k, a, _, _ in kinds] == [
        ("enqueued", 0),
        ("claimed", 1),
        ("reaped", 0),
        ("claimed", 1),
        ("succeeded", 1),
    ]
    assert kinds[3][2] not in (None, first_owner)
    # Long before the first worker's own lease would have run out.
    assert kinds[4][3] < handed[3] + timedelta(seconds=60)
