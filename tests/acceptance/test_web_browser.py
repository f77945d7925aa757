"""The dashboard in a real browser: Debian's chromium driven by Selenium against ``jobrun web``.

The dashboard is served by the real command (a subprocess), workers are real
``jobrun worker`` processes, and the database is a real PostgreSQL. CI
installs chromium and chromedriver from Debian's packages (``.ci/run``); these
tests fail, not skip, when the browser is missing. Each page's screenshot is
saved as a test artifact in ``$JOBRUN_TEST_ARTIFACTS/screenshots`` (a temporary
directory by default); with ``JOBRUN_UPDATE_SCREENSHOTS=1`` they replace the
copies in ``docs/screenshots/`` that the README shows, so a plain test run
never changes the working tree.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from tests.acceptance.web_site import PASSWORD, USER, serve, stop

from jobrun import Client, chain, group
from jobrun.domain import JobState, NewJob, NewSchedule, Outcome, OutcomeKind
from jobrun.testing import eventually_sync
from jobrun.web.actions import ACTIONS, Action
from jobrun.web.app import ROUTES

ROOT = Path(__file__).resolve().parents[2]
# An htmx swap can replace an element between finding it and using it: chromium then
# reports a stale element, or a node that "does not belong to the document".
SWAPPED = (StaleElementReferenceException, WebDriverException)
SHOTS = (
    ROOT / "docs" / "screenshots"
    if os.environ.get("JOBRUN_UPDATE_SCREENSHOTS") == "1"
    else Path(os.environ.get("JOBRUN_TEST_ARTIFACTS") or "/tmp/jobrun-test-artifacts")
    / "screenshots"
)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
AUTH_HEADER = "Basic " + __import__("base64").b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def with_client(db_url: str, body: Callable[[Client], Any]) -> Any:
    async def run() -> Any:
        async with Client(database_url=db_url) as client:
            return await body(client)

    return asyncio.run(run())


@pytest.fixture
def auth(request: pytest.FixtureRequest) -> bool:
    """Whether the dashboard asks for Basic auth and the browser sends it: yes, unless the
    test is one of ``AUTH_ON_AND_OFF``'s, which runs once each way."""
    return bool(getattr(request, "param", True))


AUTH_ON_AND_OFF = pytest.mark.parametrize(
    "auth", [True, False], ids=["auth", "open"], indirect=True
)
"""An action test runs with Basic auth on ("auth") and off ("open"): the same clicks work,
the forms carrying the CSRF token either way, and the action names who clicked."""


def actor(auth: bool) -> str:
    """Who an action records as having clicked (a job event says ``by`` and this)."""
    return f"{USER if auth else 'anonymous'} via web"


@pytest.fixture
def site(db_url: str, auth: bool) -> Iterator[str]:
    proc, url = serve(db_url, auth=auth)
    try:
        yield url
    finally:
        stop(proc)


@pytest.fixture
def worker(db_url: str) -> Iterator[Callable[[], None]]:
    procs: list[subprocess.Popen[str]] = []

    def start() -> None:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "jobrun",
                    "worker",
                    "--app",
                    "tests.acceptance.web_worker_app",
                    "--database-url",
                    db_url,
                    "--concurrency",
                    "2",
                    "--poll",
                    "200ms",
                    "--lease",
                    "3s",
                    "--queue",
                    "live",
                    "--queue",
                    "slow",
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        )

    yield start
    for proc in procs:
        stop(proc)


def browser(auth: bool = True) -> webdriver.Chrome:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} missing: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,800",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    if auth:
        # Every request of the page (XHR and EventSource too) carries the credentials.
        driver.execute_cdp_cmd("Network.enable", {})
        driver.execute_cdp_cmd(
            "Network.setExtraHTTPHeaders", {"headers": {"Authorization": AUTH_HEADER}}
        )
    return driver


@pytest.fixture
def chrome(auth: bool) -> Iterator[webdriver.Chrome]:
    driver = browser(auth)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def cell(driver: webdriver.Chrome, queue: str, column: str) -> int:
    try:
        found = driver.find_elements(By.CSS_SELECTOR, f'tr[data-queue="{queue}"] td.{column}')
        return int(found[0].text) if found else -1
    except SWAPPED:  # the live update swapped the table just now
        return -1


def click(driver: webdriver.Chrome, selector: str) -> None:
    """Click ``selector``, finding it again when a live update swapped it meanwhile."""

    def clicked(d: Any) -> bool:
        d.find_element(By.CSS_SELECTOR, selector).click()
        return True

    WebDriverWait(driver, 10, ignored_exceptions=SWAPPED).until(clicked)


def text_of(driver: webdriver.Chrome, selector: str) -> str:
    """The text of ``selector``, read again when the page replaced it meanwhile."""
    found: list[str] = []

    def read(d: Any) -> bool:
        found[:] = [d.find_element(By.CSS_SELECTOR, selector).text]
        return True

    WebDriverWait(driver, 10, ignored_exceptions=SWAPPED).until(read)
    return found[0]


def listed(driver: webdriver.Chrome) -> list[str]:
    """The ids of the jobs the listing shows, in its order."""
    rows = driver.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-id]")
    return [str(row.get_attribute("data-id")) for row in rows]


def stored_ids(db_url: str) -> set[UUID]:
    """The ids of every job in the database."""
    return {job.id for job in with_client(db_url, lambda c: c.store.list_jobs(limit=50)).jobs}


def stored_queue(db_url: str, name: str) -> Any:
    """Queue ``name`` as the store lists it: its controls and counts."""
    return {q.name: q for q in with_client(db_url, lambda c: c.store.list_queues())}[name]


async def dead_jobs(client: Client, n: int) -> list[Any]:
    store = client.store
    payloads = [{"to": f"user{i}@example.com"} for i in range(n)]
    await store.enqueue_batch(
        [NewJob(type="web.nap", queue="mail", payload=p, max_attempts=1) for p in payloads]
    )
    jobs = await store.claim(["mail"], "t", n, timedelta(seconds=60))
    return [await store.fail(job, "t", "SMTP 550: mailbox unavailable") for job in jobs]


def test_cli_refuses_a_public_bind_without_auth() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "web", "--host", "0.0.0.0"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("JOBRUN_WEB_")},
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: refusing to serve")
    assert len(result.stderr.strip().splitlines()) == 1


def test_overview_counts_change_live_while_a_worker_runs(
    db_url: str, site: str, worker: Callable[[], None], chrome: webdriver.Chrome
) -> None:
    with_client(
        db_url,
        lambda c: c.store.enqueue_batch(
            [NewJob(type="web.nap", queue="live", payload={"seconds": 0.3}) for _ in range(20)]
        ),
    )
    chrome.get(site + "/")
    WebDriverWait(chrome, 10, ignored_exceptions=SWAPPED).until(
        lambda d: d.find_element(By.ID, "live-status").text == "connected"
    )
    # A live swap may replace the table between two reads: read until it holds still.
    WebDriverWait(chrome, 10).until(lambda d: cell(d, "live", "queued") == 20)
    WebDriverWait(chrome, 10).until(lambda d: cell(d, "live", "succeeded") == 0)
    worker()
    # No reload: the numbers move because the SSE stream tells the page to refresh.
    WebDriverWait(chrome, 30).until(lambda d: cell(d, "live", "succeeded") > 0)
    WebDriverWait(chrome, 30).until(lambda d: cell(d, "live", "succeeded") == 20)
    WebDriverWait(chrome, 10).until(lambda d: cell(d, "live", "queued") == 0)


@AUTH_ON_AND_OFF
def test_bulk_retry_of_dead_jobs(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    dead = with_client(db_url, lambda c: dead_jobs(c, 3))
    chrome.get(site + "/jobs?state=dead")
    assert len(chrome.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-id]")) == 3
    click(chrome, "#select-all")
    Select(chrome.find_element(By.NAME, "action")).select_by_value("retry")
    click(chrome, "#bulk-submit")
    WebDriverWait(chrome, 10).until(lambda d: "No jobs match" in d.page_source)

    async def check(client: Client) -> None:
        for job in dead:
            assert (await client.store.get(job.id)).state is JobState.QUEUED
            assert (await client.store.events(job.id))[-1].detail == f"by {actor(auth)}"

    with_client(db_url, check)


@AUTH_ON_AND_OFF
def test_bulk_cancel_of_selected_jobs_leaves_the_others_queued(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    jobs = with_client(
        db_url,
        lambda c: c.store.enqueue_batch([NewJob(type="web.nap", queue="mail") for _ in range(3)]),
    )
    chrome.get(site + "/jobs?state=queued")
    for job in jobs[:2]:
        click(chrome, f'tr[data-id="{job.id}"] input[name="ids"]')
    Select(chrome.find_element(By.NAME, "action")).select_by_value("cancel")
    click(chrome, "#bulk-submit")
    WebDriverWait(chrome, 10, ignored_exceptions=SWAPPED).until(
        lambda d: listed(d) == [str(jobs[2].id)]
    )

    async def check(client: Client) -> None:
        states = [(await client.store.get(job.id)).state for job in jobs]
        assert states == [JobState.CANCELLED, JobState.CANCELLED, JobState.QUEUED]
        for job in jobs[:2]:
            assert (await client.store.events(job.id))[-1].detail == f"by {actor(auth)}"

    with_client(db_url, check)


@AUTH_ON_AND_OFF
def test_bulk_delete_of_selected_jobs_asks_for_their_count_then_deletes_them(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    dead = with_client(db_url, lambda c: dead_jobs(c, 3))
    chrome.get(site + "/jobs?state=dead")
    for job in (dead[0], dead[2]):
        click(chrome, f'tr[data-id="{job.id}"] input[name="ids"]')
    Select(chrome.find_element(By.NAME, "action")).select_by_value("delete")
    click(chrome, "#bulk-submit")
    WebDriverWait(chrome, 10).until(lambda d: "Delete 2 jobs?" in text_of(d, "h1"))
    click(chrome, "#confirm-delete")
    WebDriverWait(chrome, 10, ignored_exceptions=SWAPPED).until(
        lambda d: listed(d) == [str(dead[1].id)]
    )
    assert chrome.current_url.endswith("/jobs?state=dead")
    assert stored_ids(db_url) == {dead[1].id}


@AUTH_ON_AND_OFF
def test_bulk_delete_of_every_job_matching_the_filter_asks_for_their_count(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    dead = with_client(db_url, lambda c: dead_jobs(c, 3))
    kept = with_client(db_url, lambda c: c.store.enqueue(NewJob(type="web.nap", queue="mail")))
    chrome.get(site + "/jobs?state=dead")
    assert len(listed(chrome)) == len(dead)
    Select(chrome.find_element(By.NAME, "action")).select_by_value("delete")
    Select(chrome.find_element(By.NAME, "scope")).select_by_value("filter")
    click(chrome, "#bulk-submit")
    WebDriverWait(chrome, 10).until(lambda d: "Delete 3 jobs?" in text_of(d, "h1"))
    click(chrome, "#confirm-delete")
    WebDriverWait(chrome, 10).until(lambda d: "No jobs match" in d.page_source)
    assert chrome.current_url.endswith("/jobs?state=dead")
    assert stored_ids(db_url) == {kept.id}


@AUTH_ON_AND_OFF
def test_bulk_retry_and_cancel_of_every_job_matching_the_filter(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    async def setup(client: Client) -> list[Any]:
        dead = await dead_jobs(client, 2)  # in mail
        new = [NewJob(type="web.nap", queue=q) for q in ("billing", "billing", "mail")]
        return [*dead, *(await client.store.enqueue_batch(new))]

    jobs = with_client(db_url, setup)
    for query, action in [("state=dead", "retry"), ("queue=billing&state=queued", "cancel")]:
        chrome.get(f"{site}/jobs?{query}")
        assert len(listed(chrome)) == 2
        Select(chrome.find_element(By.NAME, "action")).select_by_value(action)
        Select(chrome.find_element(By.NAME, "scope")).select_by_value("filter")
        click(chrome, "#bulk-submit")
        WebDriverWait(chrome, 10).until(lambda d: "No jobs match" in d.page_source)

    async def check(client: Client) -> None:
        states = [(await client.store.get(job.id)).state for job in jobs]
        assert states == [JobState.QUEUED] * 2 + [JobState.CANCELLED] * 2 + [JobState.QUEUED]
        for job in jobs[:4]:
            assert (await client.store.events(job.id))[-1].detail == f"by {actor(auth)}"

    with_client(db_url, check)


def test_a_listed_job_id_is_its_tail_whole_in_its_title_and_its_button_copies_it(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    dead = with_client(db_url, lambda c: dead_jobs(c, 2))
    chrome.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": site, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    chrome.get(site + "/jobs")
    for job in dead:
        assert text_of(chrome, f'tr[data-id="{job.id}"] td.job-id code') == "…" + job.id.hex[-12:]
        link = chrome.find_element(By.CSS_SELECTOR, f'tr[data-id="{job.id}"] td.job-id a')
        assert link.get_attribute("title") == str(job.id)
    button = f'tr[data-id="{dead[1].id}"] button.copy'
    click(chrome, button)
    WebDriverWait(chrome, 10).until(lambda d: text_of(d, button) == "copied")
    copied = chrome.execute_async_script(
        """const done = arguments[arguments.length - 1];
        navigator.clipboard.readText().then(done, (e) => done("refused: " + e));"""
    )
    assert copied == str(dead[1].id)


def test_a_search_typed_on_the_jobs_page_finds_jobs_and_an_id_opens_its_job(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    async def setup(client: Client) -> list[Any]:
        dead = await dead_jobs(client, 2)
        await client.store.enqueue(NewJob(type="web.nap", queue="mail", payload={"vip": True}))
        return dead

    dead = with_client(db_url, setup)
    chrome.get(site + "/jobs")
    assert len(chrome.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-id]")) == 3
    chrome.find_element(By.NAME, "error").send_keys("mailbox UNAVAILABLE")
    chrome.find_element(By.NAME, "payload").send_keys('{"to": "user1@example.com"}')
    click(chrome, "#search-submit")
    WebDriverWait(chrome, 10).until(lambda d: "payload=" in d.current_url)
    found = chrome.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-id]")
    assert [row.get_attribute("data-id") for row in found] == [str(dead[1].id)]
    # The search stays in its boxes and in the state tabs.
    assert chrome.find_element(By.NAME, "error").get_attribute("value") == "mailbox UNAVAILABLE"
    click(chrome, '#state-tabs a[data-state="dead"]')
    WebDriverWait(chrome, 10).until(lambda d: "state=dead" in d.current_url)
    found = chrome.find_elements(By.CSS_SELECTOR, "#jobs-table tr[data-id]")
    assert [row.get_attribute("data-id") for row in found] == [str(dead[1].id)]
    # The end of one job's id, typed after an ellipsis, goes straight to that job.
    chrome.get(site + "/jobs")
    chrome.find_element(By.NAME, "id").send_keys("..." + str(dead[0].id)[-8:].upper())
    click(chrome, "#search-submit")
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith(f"/jobs/{dead[0].id}"))
    shot(chrome, "job-search")


@AUTH_ON_AND_OFF
def test_cancel_from_the_job_page_reaches_the_running_job(
    db_url: str, site: str, worker: Callable[[], None], chrome: webdriver.Chrome, auth: bool
) -> None:
    job = with_client(
        db_url,
        lambda c: c.store.enqueue(
            NewJob(
                type="web.nap", queue="slow", payload={"seconds": 120, "note": "<script>x</script>"}
            )
        ),
    )
    worker()

    def state() -> JobState:
        return with_client(db_url, lambda c: c.store.get(job.id)).state  # type: ignore[no-any-return]

    eventually_sync(lambda: state() is JobState.LEASED, what="the worker claiming the job")
    chrome.get(f"{site}/jobs/{job.id}")
    assert "&lt;script&gt;x&lt;/script&gt;" in chrome.page_source  # escaped, not run
    click(chrome, "#cancel")

    # The worker's next heartbeat (lease 3s) stops the handler; the job ends cancelled.
    def shows_cancelled() -> bool:
        if text_of(chrome, "#job-state") == "cancelled":
            return True
        chrome.refresh()
        return False

    eventually_sync(shows_cancelled, what="the page showing the job cancelled")
    assert f"by {actor(auth)}" in text_of(chrome, "#events")


def test_the_workers_page_lists_a_running_worker_and_links_its_jobs_both_ways(
    db_url: str, site: str, worker: Callable[[], None], chrome: webdriver.Chrome
) -> None:
    job = with_client(
        db_url,
        lambda c: c.store.enqueue(NewJob(type="web.nap", queue="slow", payload={"seconds": 120})),
    )
    worker()

    def listed() -> Any:
        found = with_client(db_url, lambda c: c.store.workers())
        return found[0] if found and found[0].running else None

    info = eventually_sync(listed, what="the worker's row listing the running job")
    chrome.get(site + "/workers")
    row = text_of(chrome, f'tr[data-owner="{info.owner}"]')
    assert "alive" in row and "live, slow" in row and "1 of 2" in row
    click(chrome, f'a[href="/jobs/{job.id}"]')
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith(f"/jobs/{job.id}"))
    click(chrome, f'#events a[href="/workers#worker-{info.owner}"]')
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith(f"#worker-{info.owner}"))


def test_a_workflow_page_draws_its_steps_and_links_them_to_their_jobs(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    parts = [NewJob(type=f"resize.{n}", queue="images", max_attempts=1) for n in range(16)]
    jobs = group(parts, then=NewJob(type="album.publish", queue="images"))
    finale = chain([jobs[-1], NewJob(type="album.notify", queue="mail")])[-1]

    async def setup(client: Client) -> None:
        await client.enqueue_batch([*jobs, finale])
        held = await client.store.claim(["images"], "browser", 6, timedelta(minutes=5))
        kinds = [OutcomeKind.COMPLETE] * 4 + [OutcomeKind.FAIL]  # the sixth stays leased
        ended = [
            Outcome(job=j, kind=k, detail="boom") for j, k in zip(held[:5], kinds, strict=True)
        ]
        await client.store.record_outcomes("browser", ended)

    with_client(db_url, setup)
    chrome.get(f"{site}/jobs/{parts[0].id}")
    click(chrome, "#workflow-link")
    WebDriverWait(chrome, 10).until(lambda d: f"/workflows/{parts[0].id}" in d.current_url)
    counts = text_of(chrome, "#workflow-counts")
    assert "18 steps" in counts and "4 succeeded" in counts and "1 dead" in counts
    assert "2 waiting" in counts and "1 leased" in counts
    assert "and 5 more" in text_of(chrome, "#workflow-graph")
    click(chrome, f'a.step[data-job="{finale.id}"]')
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith(f"/jobs/{finale.id}"))
    assert "waiting" in text_of(chrome, "#job-state")


@AUTH_ON_AND_OFF
def test_delete_from_the_job_page_asks_for_the_count_then_deletes(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    job = with_client(db_url, lambda c: c.store.enqueue(NewJob(type="web.nap", queue="mail")))
    chrome.get(f"{site}/jobs/{job.id}")
    click(chrome, "#delete")
    # The confirmation is a page of its own: wait for it, the old page may still be up.
    WebDriverWait(chrome, 10).until(lambda d: "Delete 1 job?" in text_of(d, "h1"))
    click(chrome, "#confirm-delete")
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith("/jobs"))
    assert str(job.id) not in chrome.page_source
    chrome.get(f"{site}/jobs/{job.id}")
    assert "does not exist" in chrome.page_source


@AUTH_ON_AND_OFF
def test_retry_from_the_job_page_queues_the_dead_job_again(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    [job] = with_client(db_url, lambda c: dead_jobs(c, 1))
    chrome.get(f"{site}/jobs/{job.id}")
    click(chrome, "#retry")
    WebDriverWait(chrome, 10).until(lambda d: text_of(d, "#job-state") == "queued")
    assert f"by {actor(auth)}" in text_of(chrome, "#events")
    assert not chrome.find_elements(By.ID, "retry")
    assert with_client(db_url, lambda c: c.store.get(job.id)).state is JobState.QUEUED


@AUTH_ON_AND_OFF
def test_run_now_from_the_job_page_makes_a_delayed_job_due(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    job = with_client(
        db_url,
        lambda c: c.store.enqueue(NewJob(type="web.nap", queue="mail", delay=timedelta(hours=1))),
    )
    chrome.get(f"{site}/jobs/{job.id}")
    click(chrome, "#run-now")
    WebDriverWait(chrome, 10).until(lambda d: f"by {actor(auth)}" in text_of(d, "#events"))
    assert not chrome.find_elements(By.ID, "run-now")  # due now: nothing left to bring forward
    now = with_client(db_url, lambda c: c.store.get(job.id))
    assert now.state is JobState.QUEUED and now.run_at < job.run_at - timedelta(minutes=59)


@AUTH_ON_AND_OFF
def test_a_schedule_and_a_queue_are_paused_and_resumed_by_clicking(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    async def setup(client: Client) -> None:
        await client.store.create_schedule(
            NewSchedule(name="nightly-report", type="web.nap", cron="0 3 * * *")
        )
        await client.store.create_schedule(
            NewSchedule(name="heartbeat", type="web.nap", every=timedelta(minutes=5))
        )
        await client.store.enqueue(NewJob(type="web.nap", queue="mail"))
        await client.store.set_queue_limits("mail", concurrency=4)

    with_client(db_url, setup)
    for page, row in [("/schedules", 'tr[data-name="heartbeat"]'),
                      ("/queues", 'tr[data-queue="mail"]')]:  # fmt: skip
        chrome.get(site + page)
        click(chrome, f"{row} button")
        WebDriverWait(chrome, 10, ignored_exceptions=SWAPPED).until(
            lambda d, row=row: "paused" in d.find_element(By.CSS_SELECTOR, row).text
        )
        assert text_of(chrome, f"{row} td.changed-by") == actor(auth)
        click(chrome, f"{row} button")  # now Resume
        WebDriverWait(chrome, 10).until(lambda d, row=row: text_of(d, f"{row} button") == "Pause")
        assert "paused" not in text_of(chrome, row)

    async def check(client: Client) -> None:
        schedule = await client.store.get_schedule("heartbeat")
        assert (schedule.paused, schedule.changed_by) == (False, actor(auth))
        queue = {q.name: q for q in await client.store.list_queues()}["mail"]
        assert (queue.paused, queue.changed_by, queue.concurrency_limit) == (False, actor(auth), 4)

    with_client(db_url, check)


@AUTH_ON_AND_OFF
def test_queue_limits_are_set_and_cleared_by_clicking(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    with_client(db_url, lambda c: c.store.enqueue(NewJob(type="web.nap", queue="mail")))
    chrome.get(site + "/queues")
    row = 'tr[data-queue="mail"]'
    for name, value in [("concurrency", "3"), ("rate", "10"), ("rate_seconds", "60"),
                        ("per_key", "2")]:  # fmt: skip
        chrome.find_element(By.CSS_SELECTOR, f'{row} input[name="{name}"]').send_keys(value)
    click(chrome, f'{row} form[action$="/limits"] button')
    WebDriverWait(chrome, 10).until(lambda d: text_of(d, f"{row} td.per-key") == "2")
    assert "10 per 1 min 00 s" in text_of(chrome, row)
    assert text_of(chrome, f"{row} td.changed-by") == actor(auth)
    queue = stored_queue(db_url, "mail")
    limits = (queue.concurrency_limit, queue.rate_limit, queue.rate_interval, queue.key_limit)
    assert limits == (3, 10, timedelta(seconds=60), 2)
    click(chrome, f'{row} form[action$="/clear-limits"] button')
    WebDriverWait(chrome, 10).until(lambda d: text_of(d, f"{row} td.per-key") == "—")
    assert not chrome.find_elements(By.CSS_SELECTOR, f'{row} form[action$="/clear-limits"]')
    queue = stored_queue(db_url, "mail")
    limits = (queue.concurrency_limit, queue.rate_limit, queue.key_limit)
    assert limits == (None, None, None)


def test_the_limit_inputs_show_their_whole_placeholders(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    with_client(db_url, lambda c: c.store.enqueue(NewJob(type="web.nap", queue="mail")))
    chrome.get(site + "/queues")
    # The placeholder's width in the input's own font, against the room inside the input.
    cut = chrome.execute_script(
        """const canvas = document.createElement("canvas").getContext("2d");
        return [...document.querySelectorAll("#queues-table input[placeholder]")].filter((el) => {
          const style = getComputedStyle(el);
          canvas.font = style.font;
          const room = el.clientWidth - parseFloat(style.paddingLeft)
            - parseFloat(style.paddingRight);
          return canvas.measureText(el.placeholder).width > room;
        }).map((el) => el.placeholder);"""
    )
    assert cut == []
    # concurrency, rate, rate seconds, and (since the limit per key) per key
    assert len(chrome.find_elements(By.CSS_SELECTOR, "#queues-table input[placeholder]")) == 4


ACTION_CONTROLS = (
    "form[method=post] :is(button:not([type=button]), input:not([type=hidden]), select),"
    " details.edit, #new-schedule"
)
"""What offers an action: a control of a form that POSTs (a copy button is
``type=button`` and posts nothing), and the Schedules page's create and edit folds."""


async def something_for_every_action(client: Client) -> list[Any]:
    """A dead job and a delayed one, a schedule active and one paused, a queue limited and
    one paused: each page then shows every action it has (unless read-only)."""
    [dead] = await dead_jobs(client, 1)
    delayed = await client.store.enqueue(
        NewJob(type="web.nap", queue="mail", delay=timedelta(hours=1))
    )
    for name in ("heartbeat", "nightly"):
        await client.store.create_schedule(
            NewSchedule(name=name, type="web.nap", every=timedelta(minutes=5))
        )
    await client.store.pause_schedule("nightly")
    await client.store.set_queue_limits("mail", concurrency=4)
    await client.store.pause_queue("billing")
    return [dead, delayed]


def action_paths(job_id: UUID) -> list[str]:
    """Every action's page path and its API path, on job ``job_id``, schedule heartbeat
    and queue mail."""
    paths = []
    for path, target in ROUTES:
        if isinstance(target, Action):
            name = "heartbeat" if path.startswith("/schedules/") else "mail"
            path = path.replace("{job_id}", str(job_id)).replace("{name:path}", name)
            paths += [path, "/api" + path]
    return paths


def test_read_only_hides_and_refuses_actions(db_url: str, chrome: webdriver.Chrome) -> None:
    job, delayed = with_client(db_url, something_for_every_action)
    before = (stored_ids(db_url), stored_queue(db_url, "mail"), stored_queue(db_url, "billing"))
    proc, url = serve(db_url, "--read-only")
    try:
        chrome.get(f"{url}/jobs/{job.id}")
        assert chrome.find_elements(By.ID, "read-only-banner")
        assert not chrome.find_elements(By.ID, "retry")
        assert not chrome.find_elements(By.CSS_SELECTOR, ACTION_CONTROLS)
        chrome.get(f"{url}/jobs")
        assert not chrome.find_elements(By.ID, "bulk-actions")
        assert not chrome.find_elements(By.CSS_SELECTOR, ACTION_CONTROLS)
        for page in (f"/jobs/{delayed.id}", "/schedules", "/queues"):
            chrome.get(url + page)
            offered = chrome.find_elements(By.CSS_SELECTOR, ACTION_CONTROLS)
            assert offered == [], (page, [e.get_attribute("outerHTML") for e in offered])
        # Even a hand-made request with a valid token is refused, for every action.
        statuses = chrome.execute_async_script(
            """const [paths, done] = [arguments[0], arguments[arguments.length - 1]];
            fetch('/api/csrf').then(r => r.json()).then(t => Promise.all(paths.map(p =>
              fetch(p, {method: 'POST', headers: {'X-CSRF-Token': t.token}})
                .then(r => [p, r.status])))).then(done, e => done(String(e)));""",
            action_paths(job.id),
        )
        assert len(statuses) == 2 * len(ACTIONS)
        assert [(path, status) for path, status in statuses if status != 403] == []
        assert [f"/api/jobs/{job.id}/retry", 403] in statuses
    finally:
        stop(proc)
    assert with_client(db_url, lambda c: c.store.get(job.id)).state is JobState.DEAD
    after = (stored_ids(db_url), stored_queue(db_url, "mail"), stored_queue(db_url, "billing"))
    assert after == before
    schedules = with_client(db_url, lambda c: c.store.list_schedules())
    assert [(s.name, s.paused) for s in schedules] == [("heartbeat", False), ("nightly", True)]


def test_a_request_without_auth_gets_401(site: str) -> None:
    driver = browser(auth=False)
    try:
        driver.get(site + "/")
        # Headless chromium answers the Basic challenge with an empty page: nothing shown.
        assert "Overview" not in driver.page_source
    finally:
        driver.quit()
    response = httpx.get(site + "/")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Basic")


@AUTH_ON_AND_OFF
def test_a_schedule_is_created_edited_run_now_and_deleted_by_clicking(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    chrome.get(site + "/schedules")
    click(chrome, "#new-schedule summary")
    form = chrome.find_element(By.ID, "create-schedule")
    for name, value in [("name", "reports/eu"), ("type", "web.nap"), ("every", "1h"),
                        ("payload", '{"to": "a&b"}'), ("queue", "mail")]:  # fmt: skip
        form.find_element(By.NAME, name).send_keys(value)
    click(chrome, "#create")
    row = 'tr[data-name="reports/eu"]'
    WebDriverWait(chrome, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, row))
    click(chrome, f"{row} details.edit summary")
    every = chrome.find_element(By.CSS_SELECTOR, f'{row} details.edit input[name="every"]')
    every.clear()
    every.send_keys("5m")
    click(chrome, f"{row} button.save")
    WebDriverWait(chrome, 10, ignored_exceptions=SWAPPED).until(
        lambda d: "every 5 min 00 s" in d.find_element(By.CSS_SELECTOR, row).text
    )
    assert text_of(chrome, f"{row} td.changed-by") == actor(auth)
    click(chrome, f"{row} button.run-now")
    eventually_sync(
        lambda: len(with_client(db_url, lambda c: c.store.list_jobs(limit=5)).jobs) == 1,
        what="the job the schedule ran now",
    )
    jobs = with_client(db_url, lambda c: c.store.list_jobs(limit=5)).jobs
    assert [(j.queue, j.payload) for j in jobs] == [("mail", {"to": "a&b"})]
    shot(chrome, "schedules-edit")
    click(chrome, f"{row} button.delete")
    # The confirmation is a page of its own: wait for it, the old page may still be up.
    WebDriverWait(chrome, 10).until(lambda d: "Delete schedule reports/eu?" in text_of(d, "h1"))
    click(chrome, "#confirm-delete")
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith("/schedules"))
    assert not chrome.find_elements(By.CSS_SELECTOR, row)
    assert with_client(db_url, lambda c: c.store.list_schedules()) == []


@AUTH_ON_AND_OFF
def test_a_queue_is_drained_and_cleared_by_clicking(
    db_url: str, site: str, chrome: webdriver.Chrome, auth: bool
) -> None:
    async def setup(client: Client) -> None:
        for queue in ("billing/eu", "billing/eu", "billing/eu", "billing"):
            await client.store.enqueue(NewJob(type="web.nap", queue=queue))
        await client.store.claim(["billing/eu"], "w", 1, timedelta(minutes=1))

    with_client(db_url, setup)
    chrome.get(site + "/queues")
    row = 'tr[data-queue="billing/eu"]'
    click(chrome, f"{row} button.drain")
    WebDriverWait(chrome, 10, ignored_exceptions=SWAPPED).until(
        lambda d: "draining: 1 running" in d.find_element(By.CSS_SELECTOR, row).text
    )
    assert text_of(chrome, f"{row} td.changed-by") == actor(auth)
    click(chrome, f"{row} button.clear")
    # The confirmation is a page of its own: wait for it, the old page may still be up.
    asked = "Clear queue billing/eu: delete 2 jobs?"
    WebDriverWait(chrome, 10).until(lambda d: asked in text_of(d, "h1"))
    click(chrome, "#confirm-delete")
    WebDriverWait(chrome, 10).until(lambda d: d.current_url.endswith("/queues"))
    listed = {q.name: q for q in with_client(db_url, lambda c: c.store.list_queues())}
    assert (listed["billing/eu"].queued, listed["billing/eu"].leased) == (0, 1)
    assert listed["billing"].queued == 1 and not listed["billing"].paused
    shot(chrome, "queues-drain")


@AUTH_ON_AND_OFF
def test_clear_queued_on_the_queues_page_asks_for_the_count_then_deletes_only_those(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    async def setup(client: Client) -> list[Any]:
        [dead] = await dead_jobs(client, 1)  # in mail, before the queued ones it must not claim
        new = [NewJob(type="web.nap", queue=q) for q in ("mail", "mail", "billing")]
        return [dead, *(await client.store.enqueue_batch(new))]

    dead, _, _, other = with_client(db_url, setup)
    chrome.get(site + "/queues")
    click(chrome, 'tr[data-queue="mail"] form.clear-queue button')
    WebDriverWait(chrome, 10).until(lambda d: "Delete 2 jobs?" in text_of(d, "h1"))
    click(chrome, "#confirm-delete")
    WebDriverWait(chrome, 10).until(lambda d: "No jobs match" in d.page_source)
    assert "queue=mail" in chrome.current_url and "state=queued" in chrome.current_url
    assert stored_ids(db_url) == {dead.id, other.id}
