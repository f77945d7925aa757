"""A running job's progress, as users see it: ``jobrun worker`` writes what handlers
report, ``jobrun jobs show`` and ``jobrun web`` show it while the job runs.

The worker runs ``tests.acceptance.progress_app`` as a subprocess with a short
heartbeat; each handler reports and then waits for a file the test creates.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
from tests.acceptance.test_cli_worker import ROOT, worker
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client
from jobrun.domain import JobState, NewJob
from jobrun.testing import eventually

APP = "tests.acceptance.progress_app"


def show(db_url: str, job_id: object) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "jobs", "show", str(job_id), "--database-url", db_url],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def progress_row(text: str) -> str:
    """The table row of ``jobs show`` whose field is progress."""
    return next(line for line in text.splitlines() if line.startswith("│ progress "))


async def test_progress_reported_by_handlers_shows_in_the_cli_and_the_dashboard_while_they_run(
    db_url: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    async with Client(database_url=db_url) as client:
        jobs = [
            await client.enqueue(NewJob(type=kind, payload={"release": str(release)}))
            for kind in ("progress.async", "progress.sync")
        ]
        with worker(db_url, "--app", APP, "--heartbeat-every", "0.2s", "--concurrency", "2"):

            async def reported() -> bool:
                return len(await client.store.progress_of([j.id for j in jobs])) == 2

            await eventually(reported, what="both jobs' progress written by the heartbeat")
            progress = await client.store.progress_of([j.id for j in jobs])
            assert progress[jobs[0].id].describe() == "50% resizing images"
            assert progress[jobs[1].id].describe() == "75% from a thread"

            assert "50% resizing images" in progress_row(show(db_url, jobs[0].id))
            assert "75% from a thread" in progress_row(show(db_url, jobs[1].id))
            proc, site = serve(db_url)
            try:
                async with httpx.AsyncClient(
                    base_url=site, auth=(USER, PASSWORD), timeout=30
                ) as web:
                    page = await web.get(f"/jobs/{jobs[0].id}")
                    assert 'id="job-progress"' in page.text
                    assert "50% resizing images" in page.text
                    listing = await web.get("/jobs")
                    assert "75% from a thread" in listing.text
                    api = (await web.get(f"/api/jobs/{jobs[1].id}")).json()
                    assert api["progress"]["fraction"] == 0.75
                    assert api["progress"]["message"] == "from a thread"
            finally:
                await asyncio.to_thread(stop, proc)

            release.touch()

            async def finished() -> bool:
                states = [(await client.store.get(j.id)).state for j in jobs]
                return states == [JobState.SUCCEEDED, JobState.SUCCEEDED]

            await eventually(finished, what="both jobs succeeding")
        # A finished job shows no progress, and maintenance deletes its report.
        assert await client.store.progress_of([j.id for j in jobs]) == {}
        assert "%" not in progress_row(show(db_url, jobs[0].id))
        assert await client.store.prune_progress_batch() == 2
        assert await client.store.prune_progress_batch() == 0
