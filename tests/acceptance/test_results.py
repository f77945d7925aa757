"""Results, as users get them: ``jobrun worker`` stores what handlers return,
``Client.result`` waits for it, ``jobrun jobs show`` and ``jobrun web`` show it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import httpx
import pytest
from tests.acceptance.test_cli_worker import ROOT, worker
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client
from jobrun.domain import NewJob
from jobrun.errors import JobNotSucceeded

APP = "tests.acceptance.results_app"


def result_cli(db_url: str, job_id: object, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jobrun", "jobs", "result", str(job_id), "--database-url", db_url,
         *flags],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip


def show(db_url: str, job_id: object) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "jobs", "show", str(job_id), "--database-url", db_url],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


async def test_results_from_a_cli_worker_reach_the_client_the_cli_and_the_dashboard(
    db_url: str,
) -> None:
    async with Client(database_url=db_url) as client:
        thumb = await client.enqueue(
            NewJob(type="thumbnail", payload={"width": 64, "name": "a,b/../c"})
        )
        names = ["x" * 20, "<script>alert(1)</script>"]
        rows = await client.enqueue(NewJob(type="count.rows", payload=names))
        big = await client.enqueue(NewJob(type="too.big", max_attempts=1))
        with worker(db_url, "--app", APP, "--concurrency", "3"):
            # This client holds no registry: the value comes back as JSON.
            assert await client.result(thumb.id, wait=60) == {
                "width": 64,
                "url": "/thumbs/a,b/../c",
            }
            assert await client.result(rows.id, wait=60) == {"rows": 2, "names": names}
            with pytest.raises(JobNotSucceeded) as caught:
                await client.result(big.id, wait=60)
        assert "result of job type 'too.big' is 1048578 bytes, over the 1048576-byte limit" in (
            caught.value.error or ""
        )
        # A client holding the app's registry gets the declared type back.
        from tests.acceptance.results_app import Thumbnail, registry

        async with Client(registry, database_url=db_url) as typed:
            assert await typed.result(thumb.id) == Thumbnail(width=64, url="/thumbs/a,b/../c")

    printed = result_cli(db_url, rows.id)
    assert (printed.returncode, printed.stdout) == (
        0,
        json.dumps({"rows": 2, "names": names}) + "\n",
    )
    dead = result_cli(db_url, big.id, "--wait", "5s")
    assert dead.returncode == 1 and dead.stdout == ""
    assert dead.stderr.startswith(f"error: job {big.id} ended dead: result of job type 'too.big'")
    missing = result_cli(db_url, "0190b3c4-0000-7000-8000-000000000000")
    assert missing.returncode == 2 and "does not exist" in missing.stderr

    shown = show(db_url, rows.id)
    result_line = next(line for line in shown.splitlines() if line.startswith("│ result "))
    assert '"rows": 2' in result_line
    assert "result" in show(db_url, big.id)  # the field is there, empty for a dead job

    proc, site = serve(db_url)
    try:
        async with httpx.AsyncClient(base_url=site, auth=(USER, PASSWORD), timeout=30) as web:
            page = await web.get(f"/jobs/{rows.id}")
            assert 'id="result"' in page.text
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
            assert "<script>alert(1)</script>" not in page.text
            dead_page = await web.get(f"/jobs/{big.id}")
            assert 'id="result"' not in dead_page.text
            api = (await web.get(f"/api/jobs/{thumb.id}")).json()
            assert api["result"] == {"width": 64, "url": "/thumbs/a,b/../c"}
            assert (await web.get(f"/api/jobs/{big.id}")).json()["result"] is None
    finally:
        await asyncio.to_thread(stop, proc)


def test_jobs_result_waits_for_a_running_job_and_says_when_it_is_not_finished(
    db_url: str,
) -> None:
    async def enqueue() -> str:
        async with Client(database_url=db_url) as client:
            made = await client.enqueue(NewJob(type="thumbnail", payload={"width": 1, "name": "x"}))
        return str(made.id)

    job_id = asyncio.run(enqueue())
    early = result_cli(db_url, job_id)
    assert early.returncode == 3
    assert early.stderr == f"error: job {job_id} is queued, not finished\n"
    with worker(db_url, "--app", APP):
        waited = result_cli(db_url, job_id, "--wait", "60s")
    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout) == {"width": 1, "url": "/thumbs/x"}
