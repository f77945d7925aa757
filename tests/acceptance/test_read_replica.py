"""Reads from a replica (``read_url``): the CLI and the dashboard read there, say its lag,
and send every write to the primary.

A primary and a streaming standby of its own (``own_servers``). To prove where a
read went, the standby's replay is paused: a job enqueued on the primary then
exists there and not on the standby, so a listing that lacks it was read from
the standby, and the lag it reports is no longer "up to date". Actions (a
pause, a cancel) go to the primary, where a standby would have refused them
as writes in a read-only transaction.

Like the other tests with servers of their own, this runs once, in the pass
without ``JOBRUN_TEST_DATABASE_URL``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from uuid import UUID

import httpx
import pytest
from tests.acceptance.web_site import PASSWORD, USER, serve, stop
from tests.integration.own_servers import LocalServer, missing_binaries, server_root

from jobrun import Client
from jobrun.domain import NewJob
from jobrun.testing import eventually, eventually_sync

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing_binaries() is not None, reason=str(missing_binaries())),
    pytest.mark.skipif(
        bool(os.environ.get("JOBRUN_TEST_DATABASE_URL")),
        reason="starts servers of its own: runs once, in the pass without JOBRUN_TEST_DATABASE_URL",
    ),
]


@pytest.fixture
def servers() -> Iterator[tuple[LocalServer, LocalServer]]:
    with server_root() as root:
        primary, standby = LocalServer(root, "primary"), LocalServer(root, "standby")
        primary.initdb()
        primary.start()
        try:
            primary.execute("CREATE DATABASE jobs")
            subprocess.run(
                [sys.executable, "-m", "jobrun", "migrate", "--database-url", primary.url("jobs")],
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
            standby.make_standby_of(primary)
            standby.start()
            try:
                yield primary, standby
            finally:
                standby.stop()
        finally:
            primary.stop()


def jobrun(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_")}
    return subprocess.run(
        [sys.executable, "-m", "jobrun", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def replayed(standby: LocalServer, job_id: object) -> bool:
    return standby.execute(f"SELECT count(*) FROM jobs WHERE id = '{job_id}'", "jobs") == [(1,)]


async def test_the_cli_and_the_dashboard_read_the_replica_say_its_lag_and_write_to_the_primary(
    servers: tuple[LocalServer, LocalServer],
) -> None:
    primary, standby = servers
    write_url, read_url = primary.url("jobs"), standby.url("jobs")
    async with Client(database_url=write_url, read_url=read_url) as client:
        old = await client.enqueue(NewJob(type="report", queue="mail"))
        await eventually(lambda: replayed(standby, old.id), what="the standby replaying")
        assert await client.reader.replica_lag() is not None
        assert await client.store.replica_lag() is None  # the primary
        standby.execute("SELECT pg_wal_replay_pause()")
        new = await client.enqueue(NewJob(type="report", queue="mail"))
        # The reader's view: the old job only, and a lag that says so.
        page = await client.reader.list_jobs()
        assert [job.id for job in page.jobs] == [old.id]

        # The lag counts WAL received but not replayed: until the standby has
        # received the new job's WAL it is, rightly, up to date with what it has.
        async def behind() -> bool:
            lag = await client.reader.replica_lag()
            return lag is not None and "behind the primary" in lag.describe()

        await eventually(behind, what="the paused standby saying it is behind")

    listed = jobrun("jobs", "list", "--database-url", write_url, "--read-url", read_url)
    assert listed.returncode == 0, listed.stderr
    assert str(old.id) in listed.stdout and str(new.id) not in listed.stdout
    assert "note: read from a replica," in listed.stderr
    assert "behind the primary" in listed.stderr, listed.stderr
    stats = jobrun("stats", "--database-url", write_url, "--read-url", read_url)
    assert stats.returncode == 0 and "behind the primary" in stats.stderr, stats.stderr
    shown = jobrun("jobs", "show", str(new.id), "--database-url", write_url, "--read-url", read_url)
    # Not there yet: the error comes with the lag that explains it.
    assert shown.returncode == 2 and "does not exist" in shown.stderr, shown.stderr
    assert "behind the primary" in shown.stderr, shown.stderr
    # Without --read-url everything is read on the primary, and nothing says "replica".
    direct = jobrun("jobs", "list", "--database-url", write_url)
    assert str(new.id) in direct.stdout and "replica" not in direct.stderr

    check_dashboard(primary, standby, old.id, new.id)


def check_dashboard(primary: LocalServer, standby: LocalServer, old: UUID, new: UUID) -> None:
    """``jobrun web --read-url``: pages and API read the paused replica, actions the primary."""
    proc, site = serve(primary.url("jobs"), "--read-url", standby.url("jobs"))
    try:
        with httpx.Client(base_url=site, auth=(USER, PASSWORD), timeout=30) as web:
            jobs_page = web.get("/jobs")
            assert jobs_page.status_code == 200
            assert str(old) in jobs_page.text and str(new) not in jobs_page.text
            assert 'id="replica-banner"' in jobs_page.text
            assert "behind the primary" in jobs_page.text
            api = web.get("/api/jobs")
            assert api.status_code == 200
            assert "behind the primary" in api.headers["X-Jobrun-Replica"]
            # Writes go to the primary: the standby would refuse them.
            token = web.get("/api/csrf").json()["token"]
            paused = web.post("/api/queues/mail/pause", headers={"X-CSRF-Token": token})
            assert paused.status_code == 200, paused.text
            cancelled = web.post(f"/api/jobs/{new}/cancel", headers={"X-CSRF-Token": token})
            assert cancelled.status_code == 200, cancelled.text
            state = primary.execute(f"SELECT state FROM jobs WHERE id = '{new}'", "jobs")
            assert state == [("cancelled",)]
            standby.execute("SELECT pg_wal_replay_resume()")

            def caught_up() -> bool:
                page = web.get("/jobs")
                return str(new) in page.text and "up to date with the primary" in page.text

            eventually_sync(caught_up, what="the dashboard showing the replica caught up")
            assert (
                web.get("/api/jobs")
                .headers["X-Jobrun-Replica"]
                .endswith("up to date with the primary")
            )
    finally:
        stop(proc)
