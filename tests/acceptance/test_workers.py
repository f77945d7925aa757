"""The live workers, as operators see them: ``jobrun worker`` processes write their
rows, ``jobrun workers`` and the dashboard list them with what they run, a stopped
worker leaves, and a killed one is shown as gone until maintenance prunes it."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from datetime import timedelta
from pathlib import Path

import httpx
from tests.acceptance.test_cli import jobrun
from tests.acceptance.test_cli_worker import worker
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client
from jobrun.domain import NewJob, WorkerInfo
from jobrun.testing import eventually

PROGRESS_APP = "tests.acceptance.progress_app"


async def test_a_worker_is_listed_with_its_running_job_and_leaves_when_it_stops(
    db_url: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with Client(database_url=db_url) as client:
        job = await client.enqueue(NewJob(type="progress.async", payload={"release": str(release)}))
        with worker(
            db_url, "--app", PROGRESS_APP, "--heartbeat-every", "0.2s", "--queue", "default"
        ) as proc:

            async def running() -> WorkerInfo | None:
                found = await client.store.workers()
                return found[0] if len(found) == 1 and found[0].running else None

            info = await eventually(running, what="the worker's row listing its job")
            assert (info.pid, info.alive, info.queues, info.leased) == (
                proc.pid,
                True,
                ("default",),
                1,
            )
            assert [(j.id, j.type) for j in info.running] == [(job.id, "progress.async")]
            assert info.beat == timedelta(milliseconds=200)

            listed = await asyncio.to_thread(jobrun, "workers", "--jobs", "--database-url", db_url)
            assert listed.returncode == 0, listed.stderr
            assert info.owner in listed.stdout and str(job.id) in listed.stdout
            assert "alive" in listed.stdout and "1/100" in listed.stdout

            site_proc, site = serve(db_url)
            try:
                async with httpx.AsyncClient(
                    base_url=site, auth=(USER, PASSWORD), timeout=30
                ) as web:
                    page = await web.get("/workers")
                    assert page.status_code == 200
                    assert f'id="worker-{info.owner}"' in page.text
                    assert f'href="/jobs/{job.id}"' in page.text
                    api = (await web.get("/api/workers")).json()
                    assert [w["owner"] for w in api] == [info.owner]
                    assert api[0]["running"][0]["id"] == str(job.id)
                    job_page = await web.get(f"/jobs/{job.id}")
                    assert f'href="/workers#worker-{info.owner}"' in job_page.text
            finally:
                await asyncio.to_thread(stop, site_proc)

            release.touch()
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 60)
        assert await client.store.workers() == []
        stopped = await asyncio.to_thread(jobrun, "workers", "--database-url", db_url)
        assert stopped.stdout.strip() == "no workers"


async def test_a_killed_worker_is_shown_gone_then_pruned(db_url: str) -> None:
    async with Client(database_url=db_url) as client:
        with worker(db_url, "--heartbeat-every", "0.2s") as proc:

            async def written() -> list[WorkerInfo]:
                return await client.store.workers()

            (info,) = await eventually(written, what="the worker's row")
            assert info.alive
            proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(proc.wait, 60)

            async def gone() -> bool:
                return not (await client.store.workers())[0].alive

            await eventually(gone, what="the row shown as gone after three intervals")
            listed = await asyncio.to_thread(jobrun, "workers", "--database-url", db_url)
            assert "gone" in listed.stdout
            assert await client.store.prune_workers(timedelta(hours=1)) == 0  # too recent
            assert await client.store.prune_workers(timedelta(0)) == 1
            assert await client.store.workers() == []
    assert isinstance(proc, subprocess.Popen)
