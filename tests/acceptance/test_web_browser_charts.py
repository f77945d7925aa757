"""The Charts page in Chromium, on an hour of back-dated history rolled up by the real roll-up."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait
from tests.acceptance.test_web_browser import auth, chrome, click, site, with_client

from jobrun import Client
from jobrun.domain import NewJob
from jobrun.rollup import Rollup

__all__ = ["auth", "chrome", "site"]  # the fixtures this module uses, imported from their home

QUEUES = {"emails": ("send_email", 0.02), "billing/eu": ("charge_invoice", 0.2)}
SPREAD_EVENTS = """
WITH spread AS (
    SELECT id, row_number() OVER (ORDER BY id) AS n FROM jobs WHERE queue = %(queue)s
)
UPDATE job_events
SET at = at - make_interval(secs => spread.n * %(spacing)s)
         - CASE WHEN kind = 'claimed'
                THEN make_interval(secs => %(run)s * (1 + mod(spread.n, 7)))
                ELSE interval '0' END
FROM spread
WHERE job_events.job_id = spread.id
"""
DUE_BEFORE_CLAIM = """
UPDATE jobs
SET run_at = claimed.at
             - make_interval(secs => 0.01 * (1 + mod(get_byte(uuid_send(jobs.id), 15), 40)))
FROM job_events AS claimed
WHERE claimed.job_id = jobs.id AND claimed.kind = 'claimed' AND jobs.queue = %(queue)s
"""
ELEMENT_AT_THREE_QUARTERS = """
const box = document.querySelector('#chart-throughput svg').getBoundingClientRect();
const el = document.elementFromPoint(box.left + box.width * 0.75, box.top + box.height / 2);
return [el.tagName, el.querySelector('title') && el.querySelector('title').textContent];
"""


async def history(client: Client, db_url: str) -> None:
    """600 jobs per queue run through claim and completion (one in ten failing for good),
    their events then moved back over the last hour, and rolled up."""
    store = client.store
    for queue, (type, _) in QUEUES.items():
        await store.enqueue_batch(
            [NewJob(type=type, queue=queue, max_attempts=1) for _ in range(600)]
        )
        jobs = await store.claim([queue], "w1", 600, timedelta(minutes=5))
        for i, job in enumerate(jobs):
            if i % 10 == 0:
                await store.fail(job, "w1", "card declined" if queue != "emails" else "550")
            else:
                await store.complete(job, "w1")
    async with await psycopg.AsyncConnection.connect(db_url, autocommit=True) as conn:
        # Spread each queue's jobs over 50 minutes of the hour: a job's claim and
        # outcome move back together, the claim a few of the queue's run times
        # before the outcome, and the job falls due a moment before its claim.
        # The page's hour starts on a whole minute, so the oldest outcome must be
        # a minute or more inside it: spread over 59 minutes, it fell out when a
        # minute turned between this and the page's load (1,079 of 1,080 shown).
        for queue, (_, seconds) in QUEUES.items():
            await conn.execute(SPREAD_EVENTS, {"queue": queue, "run": seconds, "spacing": 5.0})
            await conn.execute(DUE_BEFORE_CLAIM, {"queue": queue})
    await Rollup(store).catch_up()


def test_the_charts_page_draws_four_charts_with_values_on_hover_and_switches_window(
    db_url: str, site: str, chrome: webdriver.Chrome
) -> None:
    with_client(db_url, lambda c: history(c, db_url))
    chrome.get(site + "/stats")
    charts = chrome.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 4 and all(c.is_displayed() for c in charts)
    assert (
        "1,080 succeeded, 0 failed and retried, 120 dead"
        in chrome.find_element(By.ID, "stats-total").text
    )
    # The column under the pointer carries the values of its step in its title.
    titles: list[Any] = chrome.execute_script(ELEMENT_AT_THREE_QUARTERS)
    assert titles[0] == "rect" and " UTC: succeeded " in titles[1] and "dead" in titles[1]
    rows = {
        r.get_attribute("data-queue"): r.text
        for r in chrome.find_elements(By.CSS_SELECTOR, "#stats-by-queue tbody tr")
    }
    assert set(rows) == {"emails", "billing/eu"}
    assert "540" in rows["billing/eu"] and "10.0%" in rows["billing/eu"]

    click(chrome, 'a[data-window="day"]')
    WebDriverWait(chrome, 10).until(lambda d: "window=day" in d.current_url)
    assert len(chrome.find_elements(By.CSS_SELECTOR, "svg.chart")) == 4
    Select(chrome.find_element(By.NAME, "queue")).select_by_value("billing/eu")
    WebDriverWait(chrome, 10).until(lambda d: "queue=billing%2Feu" in d.current_url)
    assert (
        "540 succeeded, 0 failed and retried, 60 dead"
        in chrome.find_element(By.ID, "stats-total").text
    )
    assert "window=day" in chrome.current_url
