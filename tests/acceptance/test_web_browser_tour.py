"""Every dashboard page in Chromium on a database of 10,000 jobs in mixed states, with
auth on, with auth off and read-only; the pages' screenshots in docs/screenshots come
from the first of these."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta

import psycopg
from selenium import webdriver
from selenium.webdriver.common.by import By
from tests.acceptance.test_web_browser import browser, shot, with_client, worker
from tests.acceptance.test_web_browser_charts import DUE_BEFORE_CLAIM, SPREAD_EVENTS
from tests.acceptance.web_site import serve, stop

from jobrun import Client, group
from jobrun.domain import JobFilter, JobState, NewJob, NewSchedule
from jobrun.rollup import Rollup
from jobrun.testing import eventually_sync

KINDS = {
    "emails": ("send_email", 0.05),
    "billing/eu": ("charge_invoice", 0.4),
    "reports": ("render_report", 2.5),
    "webhooks": ("deliver_webhook", 0.2),
    "media": ("transcode", 8.0),
}
ERRORS = [
    "SMTP 550: mailbox unavailable",
    "card declined: insufficient funds",
    "TimeoutError: the remote end took longer than 30 s",
    "ConnectionResetError: [Errno 104] Connection reset by peer",
]
JOBS = 10_000
__all__ = ["worker"]  # the fixture this module uses, imported from its home


async def mixed(client: Client, db_url: str) -> dict[str, str]:
    """10,000 jobs: most succeeded over the last hour, some dead, some retrying, some
    cancelled, a backlog queued; a group; three schedules; a paused and a limited queue.
    Returns ids the pages need."""
    store = client.store
    rng = random.Random(7)
    names = list(KINDS)
    per_queue = JOBS // len(names)
    for queue in names:
        type, _ = KINDS[queue]
        for start in range(0, per_queue, 1000):
            await store.enqueue_batch(
                [
                    NewJob(
                        type=type,
                        queue=queue,
                        payload={"customer": rng.randrange(1, 500), "n": start + i},
                        max_attempts=1 if i % 7 else 3,
                    )
                    for i in range(1000)
                ]
            )
        # Claim most of the queue; 92% succeed, the rest fail (dead, or retried later).
        claimed = await store.claim(
            [queue], "tour-1:4242:ab12", per_queue - 150, timedelta(hours=1)
        )
        for job in claimed:
            if rng.random() < 0.92:
                await store.complete(job, "tour-1:4242:ab12")
            else:
                await store.fail(job, "tour-1:4242:ab12", rng.choice(ERRORS))
    listed = await store.list_jobs(JobFilter(state=JobState.QUEUED), limit=60)
    for job in listed.jobs:
        await store.cancel(job.id, actor="ops via web")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        for queue, (_, seconds) in KINDS.items():
            await conn.execute(SPREAD_EVENTS, {"queue": queue, "run": seconds, "spacing": 1.8})
            await conn.execute(DUE_BEFORE_CLAIM, {"queue": queue})
    await Rollup(store).catch_up()

    parts = [NewJob(type="send_email", queue="emails", payload={"part": i}) for i in range(4)]
    flow = group(parts, then=NewJob(type="render_report", queue="reports"))
    await store.enqueue_batch(flow)
    for every, name in (
        (timedelta(minutes=5), "refresh-cache"),
        (timedelta(hours=1), "hourly-digest"),
    ):
        await store.create_schedule(
            NewSchedule(name=name, type="send_email", queue="emails", every=every)
        )
    await store.create_schedule(
        NewSchedule(
            name="billing/eu/nightly", type="charge_invoice", queue="billing/eu", cron="0 2 * * *"
        )
    )
    await store.pause_queue("media", actor="ops via web")
    await store.set_queue_limits("billing/eu", concurrency=5, actor="ops via web")
    await store.enqueue(NewJob(type="web.nap", queue="slow", payload={"seconds": 300}))
    dead = await store.list_jobs(JobFilter(state=JobState.DEAD), limit=1)
    return {"dead": str(dead.jobs[0].id), "flow": str(flow[-1].id)}


PAGES = {
    "overview": "/",
    "jobs": "/jobs",
    "jobs-dead": "/jobs?state=dead",
    "job": "/jobs/{dead}",
    "workflow": "/workflows/{flow}",
    "schedules": "/schedules",
    "queues": "/queues",
    "workers": "/workers",
    "charts": "/stats",
}
POSTING = "form[method=post] button:not([type=button]), form[method=post] input[type=submit]"
"""What submits a form that changes something (the filters' forms are GETs; a copy
button is ``type=button`` and submits nothing)."""
SCREENSHOTS = {"overview", "jobs", "job", "workflow", "schedules", "queues", "workers", "charts"}


def visit(driver: webdriver.Chrome, url: str) -> str:
    driver.get(url)
    assert driver.title != "Error · jobrun", driver.find_element(By.ID, "error").text
    return driver.find_element(By.TAG_NAME, "h1").text


def test_every_page_on_ten_thousand_jobs_with_auth_on_off_and_read_only(
    db_url: str, worker: Callable[[], None]
) -> None:
    ids = with_client(db_url, lambda c: mixed(c, db_url))
    worker()  # a real worker (queues live and slow) running the long job, for the Workers page
    eventually_sync(
        lambda: any(w.running for w in with_client(db_url, lambda c: c.store.workers())),
        what="the worker's row with its running job",
    )
    for mode in ("auth", "open", "read-only"):
        tour(db_url, ids, mode)


def tour(db_url: str, ids: dict[str, str], mode: str) -> None:
    """Every page in one mode: it renders, says who is looking, and offers its actions
    unless read-only; with auth on, its screenshot."""
    extra = ["--read-only"] if mode == "read-only" else []
    proc, url = serve(db_url, *extra, auth=mode != "open")
    driver = browser(auth=mode != "open")
    try:
        for name, path in PAGES.items():
            heading = visit(driver, url + path.format(**ids))
            assert heading, (mode, name)
            who = driver.find_element(By.CSS_SELECTOR, "header .who").text
            assert who.startswith("anonymous" if mode == "open" else "ops"), (mode, who)
            posting = driver.find_elements(By.CSS_SELECTOR, POSTING)
            if mode == "read-only":
                assert posting == [], (name, [b.text for b in posting])
                assert driver.find_elements(By.ID, "read-only-banner")
            elif name in {"job", "schedules", "queues", "jobs-dead"}:
                assert posting, f"{name} offers its actions ({mode})"
            if mode == "auth" and name in SCREENSHOTS:
                shot(driver, name)
    finally:
        driver.quit()
        stop(proc)
