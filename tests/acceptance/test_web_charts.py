"""The Charts page and /api/stats over real sockets: what a `jobrun worker` ran, rolled up
by its maintenance leader, shown alike by two `jobrun web` processes and by one restarted."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest
from tests.acceptance.web_site import PASSWORD, ROOT, USER, serve, stop

from jobrun import SyncClient
from jobrun.domain import NewJob
from jobrun.errors import JobNotFound
from jobrun.postgres import SyncStore, open_sync_pool
from jobrun.testing import eventually_sync

QUEUE = "charts/eu&<b>"
AUTH = (USER, PASSWORD)


@contextlib.contextmanager
def running_worker(db_url: str, log_path: Path, *extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """`jobrun worker` as users start it, on QUEUE, with ``extra`` options; stopped after."""
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrun", "worker", "--app", "tests.acceptance.web_worker_app",
         "--database-url", db_url, "--concurrency", "4", "--poll", "200ms", "--queue", QUEUE,
         *extra],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def worker(db_url: str, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    with running_worker(db_url, tmp_path / "worker.log") as proc:
        yield proc


def stats(url: str, **params: str) -> dict[str, Any]:
    answer = httpx.get(url + "/api/stats", params=params, auth=AUTH, timeout=10)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def shown(data: dict[str, Any]) -> tuple[Any, ...]:
    """What a dashboard shows of the past: the totals and every step that had an outcome."""
    return (
        data["by_type"],
        data["by_queue"],
        [p for p in data["points"] if p["succeeded"] or p["failed"] or p["dead"]],
    )


def test_two_dashboards_show_the_same_charts_and_a_restarted_one_the_past_hour(
    db_url: str, worker: subprocess.Popen[bytes]
) -> None:
    with SyncClient(database_url=db_url) as client:
        client.enqueue_batch(
            [NewJob(type="web.nap", queue=QUEUE, payload={"seconds": 0.05}) for _ in range(30)]
            + [NewJob(type="web.boom", queue=QUEUE, max_attempts=1) for _ in range(5)]
        )
    first, first_url = serve(db_url)
    second, second_url = serve(db_url)
    try:

        def rolled_up() -> dict[str, Any] | None:
            data = stats(first_url)
            totals = {(r["type"], r["succeeded"], r["dead"]) for r in data["by_type"]}
            return data if totals == {("web.nap", 30, 0), ("web.boom", 0, 5)} else None

        # The worker's maintenance leader rolls up every 10 s.
        data = eventually_sync(rolled_up, within=90, what="the outcomes rolled up")
        worker.terminate()
        worker.wait(timeout=30)
        (nap,) = [r for r in data["by_type"] if r["type"] == "web.nap"]
        assert nap["queue"] == QUEUE and nap["failure_rate"] == 0
        assert nap["run_seconds"]["p50"] is not None and nap["run_seconds"]["p50"] >= 0.05
        assert nap["wait_seconds"]["p99"] is not None
        (boom,) = [r for r in data["by_type"] if r["type"] == "web.boom"]
        assert boom["failure_rate"] == 1.0
        assert data["by_queue"][0]["succeeded"] == 30 and data["by_queue"][0]["dead"] == 5
        assert len(data["points"]) == 60 and data["step_seconds"] == 60
        assert sum(p["succeeded"] for p in data["points"]) == 30

        eventually_sync(
            lambda: shown(stats(second_url)) == shown(stats(first_url)),
            what="two dashboard processes showing the same",
        )
        before = shown(stats(first_url))
        stop(first)
        first, first_url = serve(db_url)
        assert shown(stats(first_url)) == before, "a restarted dashboard shows the past hour"

        # The other windows and one queue, and a bad window named.
        for window, points in (("day", 144), ("week", 168)):
            other = stats(first_url, window=window, queue=QUEUE)
            assert len(other["points"]) == points
            assert sum(p["succeeded"] for p in other["points"]) == 30
        assert stats(first_url, queue="no such queue")["by_type"] == []
        bad = httpx.get(first_url + "/api/stats", params={"window": "year"}, auth=AUTH)
        assert bad.status_code == 400
        assert bad.json() == {"error": "window must be one of hour, day, week, got 'year'"}

        page = httpx.get(first_url + "/stats", params={"queue": QUEUE}, auth=AUTH)
        assert page.status_code == 200
        html = page.text
        assert html.count('<svg class="chart"') == 4
        assert "charts/eu&amp;&lt;b&gt;" in html and "<b>" not in html.split("<main>")[1]
        assert "30 succeeded, 0 failed and retried, 5 dead, 0 cancelled" in html
        # Hover values: each step's column has a title naming every series' value there.
        for point in shown(stats(first_url, queue=QUEUE))[2]:
            at = point["at"][11:16]  # HH:MM of the ISO time, UTC
            title = f"{at} UTC: succeeded {point['succeeded']}, failed 0, dead {point['dead']}"
            assert title in html, title
        assert 'id="stats-by-type"' in html and "100.0%" in html
        page_bad = httpx.get(first_url + "/stats", params={"window": "../x"}, auth=AUTH)
        assert page_bad.status_code == 400 and "window must be one of" in page_bad.text
    finally:
        stop(first)
        stop(second)


def backdated_history(db_url: str) -> UUID:
    """A job that succeeded two days ago, for the first retention pass to prune, after a
    job no worker runs: events five minutes old the charts have not rolled up (the purged
    job's go with it; the first job's stay)."""
    with open_sync_pool(db_url, max_size=2) as pool:
        store = SyncStore(pool)
        store.enqueue(NewJob(type="web.nap", queue="unread"))
        job = store.enqueue(NewJob(type="web.nap", queue="lagging"))
        (claimed,) = store.claim(["lagging"], "test", 1, timedelta(seconds=30))
        store.complete(claimed, "test")
    # Only the test moves times back: nothing in jobrun writes the past.
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE jobs SET finished_at = now() - interval '2 days' WHERE id = %s", (job.id,)
        )
        conn.execute("UPDATE job_events SET at = at - interval '5 minutes'")
    return job.id


def purged(db_url: str, job_id: UUID) -> bool:
    with open_sync_pool(db_url, max_size=1) as pool:
        try:
            SyncStore(pool).get(job_id)
        except JobNotFound:
            return True
    return False


def test_the_charts_say_they_lag_while_no_worker_rolls_up_and_stop_once_one_does(
    db_url: str, tmp_path: Path
) -> None:
    job_id = backdated_history(db_url)
    web, url = serve(db_url)
    try:
        lagging = stats(url)["lagging_since"]
        assert lagging is not None
        page = httpx.get(url + "/stats", auth=AUTH, timeout=10).text
        assert 'id="stats-lagging"' in page and "JOBRUN_CHARTS" in page

        # A worker with charts off prunes (its maintenance leader runs) but rolls up nothing.
        with running_worker(db_url, tmp_path / "off.log", "--no-charts"):
            eventually_sync(lambda: purged(db_url, job_id), what="the first retention pass")
            # Each leader turn rolls up before it prunes: with charts on, this one would have.
            assert stats(url)["lagging_since"] == lagging

        with running_worker(db_url, tmp_path / "on.log"):
            eventually_sync(
                lambda: stats(url)["lagging_since"] is None, what="the charts caught up"
            )
        page = httpx.get(url + "/stats", auth=AUTH, timeout=10).text
        assert 'id="stats-lagging"' not in page
    finally:
        stop(web)
