"""Workflows as operators see them: ``jobrun workflows show`` in a subprocess,
and the dashboard's workflow page, its API and the job page's link over a
real socket, for a group and for a job with nothing linked to it."""

from __future__ import annotations

import asyncio
import json
import re
from uuid import UUID

import httpx
from tests.acceptance.test_cli import jobrun
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client, NewJob, group

PARTS = 30  # more than a level draws: the rest share one box


async def test_a_group_is_shown_by_the_cli_and_the_dashboard(db_url: str) -> None:
    parts = [NewJob(type="part/../x,y", payload={"n": n}) for n in range(PARTS)]
    jobs = group(parts, then=NewJob(type="<script>report</script>"))
    callback = jobs[-1]
    async with Client(database_url=db_url) as client:
        await client.enqueue_batch(jobs)
        alone = await client.enqueue(NewJob(type="alone"))

    shown = await asyncio.to_thread(
        jobrun, "workflows", "show", str(parts[3].id), "--database-url", db_url
    )
    assert shown.returncode == 0, shown.stderr
    assert f"{PARTS + 1} steps ({PARTS} queued, 1 waiting)" in " ".join(shown.stdout.split())
    as_json = await asyncio.to_thread(
        jobrun, "workflows", "show", str(callback.id), "--json", "--database-url", db_url
    )
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["complete"] and data["counts"] == {"queued": PARTS, "waiting": 1}
    assert [len(level) for level in data["levels"]] == [PARTS, 1]
    assert data["levels"][1][0]["id"] == str(callback.id)
    assert {e["depends_on"] for e in data["edges"]} == {str(p.id) for p in parts}
    assert all(e["if_failed"] == "run" for e in data["edges"])
    # One step alone is a workflow of one; an unknown job and a bad id are errors.
    one = await asyncio.to_thread(
        jobrun, "workflows", "show", str(alone.id), "--json", "--database-url", db_url
    )
    assert json.loads(one.stdout)["counts"] == {"queued": 1}
    unknown = await asyncio.to_thread(
        jobrun, "workflows", "show", str(UUID(int=5)), "--database-url", db_url
    )
    assert unknown.returncode == 2 and unknown.stderr.startswith("error:")
    bad = await asyncio.to_thread(jobrun, "workflows", "show", "nope", "--database-url", db_url)
    assert bad.returncode == 2 and "nope" in bad.stderr

    proc, site = serve(db_url)
    try:
        async with httpx.AsyncClient(base_url=site, auth=(USER, PASSWORD), timeout=30) as web:
            job_page = await web.get(f"/jobs/{parts[0].id}")
            assert f'href="/workflows/{parts[0].id}"' in job_page.text
            plain = await web.get(f"/jobs/{alone.id}")
            assert plain.status_code == 200 and "workflow-link" not in plain.text
            page = await web.get(f"/workflows/{parts[0].id}")
            assert page.status_code == 200
            assert "<svg" in page.text and "<script>report" not in page.text
            assert "&lt;script&gt;report&lt;/script&gt;" in page.text
            # Every step is listed; the graph draws a dozen of the level and one box for the rest.
            listed = set(re.findall(r'<tr data-job="([0-9a-f-]+)"', page.text))
            assert listed == {str(j.id) for j in jobs}
            drawn = re.findall(r'<a href="[^"]*" class="step" data-job="([0-9a-f-]+)"', page.text)
            assert len(drawn) == 12 and f"and {PARTS - 11} more" in page.text
            api = await web.get(f"/api/workflows/{callback.id}")
            assert api.status_code == 200 and api.json()["counts"] == data["counts"]
            missing = await web.get(f"/workflows/{UUID(int=5)}")
            assert missing.status_code == 404
            assert (await web.get(f"/api/workflows/{UUID(int=5)}")).status_code == 404
            assert (await web.get("/api/workflows/not-an-id")).status_code == 404
    finally:
        stop(proc)
