"""The dashboard for the people reading it, in Chromium: dark mode, a phone's width, the
keyboard, and times that say their zone and how long ago.

One site is seeded with something for every page (dead and delayed jobs, a
workflow, schedules, queue limits, a worker's row running a job), then each
page is checked as a person would meet it. Driven like test_web_browser.py
(whose browser and screenshot helpers these share); the dark and phone-width
screenshots go where its screenshots go.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait
from tests.acceptance.test_web_browser import browser, dead_jobs, shot, with_client
from tests.acceptance.web_site import serve, stop

from jobrun import Client, group
from jobrun.domain import NewJob, NewSchedule, RunningJob, WorkerReport

# Every page's colours, as the page computes them: the body's, and each kind of
# coloured text on its own background (a badge, a link, a note, an error line).
COLOURS = """
function rgb(text) {
  const m = text.match(/[\\d.]+/g).map(Number);
  return m.length > 3 && m[3] === 0 ? null : m.slice(0, 3);
}
function luminance([r, g, b]) {
  const c = [r, g, b].map((v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
}
function contrast(a, b) {
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}
function background(el) {  // the first opaque background behind el
  for (; el; el = el.parentElement) {
    const found = rgb(getComputedStyle(el).backgroundColor);
    if (found) return found;
  }
  return [255, 255, 255];
}
const body = getComputedStyle(document.body);
const worst = [];
for (const el of document.querySelectorAll(".badge, a, .note, td.error, th, td, time .abs")) {
  if (!el.textContent.trim() || !el.getClientRects().length) continue;
  const ratio = contrast(rgb(getComputedStyle(el).color), background(el));
  if (ratio < 4.5) worst.push(el.tagName + "." + el.className + " " + ratio.toFixed(2));
}
return {background: body.backgroundColor, color: body.color, low: worst};
"""

# Each SVG box's label against the box's own fill.
GRAPH = """
const out = [];
for (const a of document.querySelectorAll("#workflow-graph a.step, #workflow-graph g.rest")) {
  const fill = getComputedStyle(a.querySelector("rect")).fill;
  for (const t of a.querySelectorAll("text")) out.push([fill, getComputedStyle(t).fill]);
}
return out;
"""


def ratio(a: str, b: str) -> float:
    def lum(colour: str) -> float:
        parts = [float(v) / 255 for v in colour[colour.index("(") + 1 : -1].split(",")[:3]]
        c = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in parts]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def seed(db_url: str) -> dict[str, str]:
    """Something for every page; the paths of the pages, by name."""

    async def setup(client: Client) -> dict[str, str]:
        store = client.store
        dead = await dead_jobs(client, 2)
        later = await store.enqueue(
            NewJob(type="report.<b>build</b>", queue="mail", delay=timedelta(hours=2))
        )
        steps = group([NewJob(type="resize", queue="images")], then=NewJob(type="publish"))
        await client.enqueue_batch(steps)
        await store.create_schedule(NewSchedule(name="nightly", type="t", cron="0 3 * * *"))
        await store.create_schedule(NewSchedule(name="beat", type="t", every=timedelta(minutes=5)))
        await store.set_queue_limits("mail", concurrency=4)
        await store.enqueue(NewJob(type="web.nap", queue="live"))
        [running] = await store.claim(["live"], "host:1:abc", 1, timedelta(minutes=5))
        started = datetime.now(UTC) - timedelta(minutes=3)
        await store.worker_seen(
            WorkerReport(
                owner="host:1:abc", host=socket.gethostname(), pid=1, version="t",
                queues=("live",), concurrency=2, beat=timedelta(seconds=5), started_at=started,
                running=(RunningJob(running.id, running.type, running.queue, started),),
            )
        )  # fmt: skip
        return {
            "overview": "/",
            "jobs": "/jobs",
            "dead job": f"/jobs/{dead[0].id}",
            "delayed job": f"/jobs/{later.id}",
            "running job": f"/jobs/{running.id}",
            "schedules": "/schedules",
            "queues": "/queues",
            "workers": "/workers",
            "workflow": f"/workflows/{steps[0].id}",
            "error": "/jobs/not-a-job-id",
        }

    return with_client(db_url, setup)  # type: ignore[no-any-return]


@pytest.fixture
def pages(db_url: str) -> Iterator[tuple[str, dict[str, str]]]:
    paths = seed(db_url)
    proc, url = serve(db_url)
    try:
        yield url, paths
    finally:
        stop(proc)


@pytest.fixture
def chrome() -> Iterator[webdriver.Chrome]:
    driver = browser()
    try:
        yield driver
    finally:
        driver.quit()


def dark(driver: webdriver.Chrome, on: bool) -> None:
    value = "dark" if on else "light"
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": value}]},
    )


def test_dark_mode_follows_the_system_and_stays_readable(
    pages: tuple[str, dict[str, str]], chrome: webdriver.Chrome
) -> None:
    url, paths = pages
    for name, path in paths.items():
        chrome.get(url + path)
        dark(chrome, False)
        light = chrome.execute_script(COLOURS)
        dark(chrome, True)
        night = chrome.execute_script(COLOURS)
        assert night["background"] != light["background"], name
        assert night["color"] != light["color"], name
        assert ratio(night["background"], night["color"]) >= 7, name
        assert light["low"] == [], (name, "light", light["low"])
        assert night["low"] == [], (name, "dark", night["low"])
        if name == "workflow":
            drawn = chrome.execute_script(GRAPH)
            dark(chrome, False)
            assert drawn and drawn != chrome.execute_script(GRAPH)
            dark(chrome, True)
            assert all(ratio(box, text) >= 4.5 for box, text in drawn), drawn
        if name == "jobs":
            shot(chrome, "jobs-dark")
    dark(chrome, False)


def test_no_page_scrolls_sideways_at_a_phones_width(
    pages: tuple[str, dict[str, str]], chrome: webdriver.Chrome
) -> None:
    url, paths = pages
    chrome.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True},
    )
    for width in (390, 1280):
        if width == 1280:
            chrome.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        for name, path in paths.items():
            chrome.get(url + path)
            inner, scroll = chrome.execute_script(
                "return [window.innerWidth, document.documentElement.scrollWidth];"
            )
            assert scroll <= inner, (name, width, scroll, inner)
            if width == 390:
                assert inner == 390
                # The navigation wraps onto lines of its own instead of running off.
                right = chrome.execute_script(
                    "return Math.max(...[...document.querySelectorAll('header *')]"
                    ".map((el) => el.getBoundingClientRect().right));"
                )
                assert right <= inner, name
                if name == "jobs":
                    shot(chrome, "jobs-phone")


def controls(driver: webdriver.Chrome) -> list[Any]:
    return [
        el
        for el in driver.find_elements(By.CSS_SELECTOR, "input, select, textarea, button")
        if el.get_attribute("type") != "hidden" and el.is_displayed()
    ]


def test_every_control_has_a_name_and_tab_reaches_it_in_page_order(
    pages: tuple[str, dict[str, str]], chrome: webdriver.Chrome
) -> None:
    url, paths = pages
    for name, path in paths.items():
        chrome.get(url + path)
        found = controls(chrome)
        unnamed = [el.get_attribute("outerHTML") for el in found if not el.accessible_name.strip()]
        assert unnamed == [], (name, unnamed)
        assert not chrome.find_elements(By.CSS_SELECTOR, "[tabindex]:not([tabindex='-1'])"), name
        assert not chrome.find_elements(By.CSS_SELECTOR, "div[onclick], span[onclick]"), name
        # Tab from the top of the page: every control, in the order the page lists them.
        chrome.execute_script("document.activeElement.blur();")
        reached: list[Any] = []
        for _ in range(200):
            ActionChains(chrome).send_keys(Keys.TAB).perform()
            now = chrome.switch_to.active_element
            if reached and now == reached[0]:
                break
            if now.tag_name == "body":
                break
            reached.append(now)
            if now in found:
                outline = chrome.execute_script(
                    "const s = getComputedStyle(arguments[0]);"
                    "return [s.outlineStyle, parseFloat(s.outlineWidth)];",
                    now,
                )
                shown = now.get_attribute("outerHTML")[:120]
                assert outline[0] != "none" and outline[1] >= 2, (name, outline, shown)
        # A date-time input takes a Tab per part (day, month, …): count it once.
        order = [el for i, el in enumerate(reached) if el in found and el not in reached[:i]]
        assert order == found, (
            name,
            [el.get_attribute("name") or el.text for el in order],
            [el.get_attribute("name") or el.text for el in found],
        )


def test_enter_submits_and_a_destructive_button_is_never_the_default(
    pages: tuple[str, dict[str, str]], chrome: webdriver.Chrome
) -> None:
    url, paths = pages
    chrome.get(url + "/jobs")
    assert chrome.find_element(By.NAME, "action").get_attribute("value") == "retry"
    field = chrome.find_element(By.NAME, "queue")
    field.send_keys("mail", Keys.ENTER)
    WebDriverWait(chrome, 10).until(lambda d: "queue=mail" in d.current_url)
    chrome.get(url + paths["dead job"])
    chrome.find_element(By.ID, "delete").click()
    WebDriverWait(chrome, 10).until(lambda d: d.find_elements(By.ID, "confirm-delete"))
    # Asked to confirm, the page does not stand on the delete: Enter alone deletes nothing.
    assert chrome.switch_to.active_element.get_attribute("id") != "confirm-delete"


def test_every_time_reads_from_now_and_says_its_zone(
    pages: tuple[str, dict[str, str]], chrome: webdriver.Chrome
) -> None:
    url, paths = pages
    seen: dict[str, list[str]] = {}
    for name, path in paths.items():
        chrome.get(url + path)
        times = chrome.execute_script(
            """return [...document.querySelectorAll("time")].map((t) =>
                 [t.getAttribute("datetime"), t.title, t.textContent]);"""
        )
        for machine, title, text in times:
            assert machine.endswith("Z"), (name, machine)
            assert title.endswith(" UTC") and title[:10] == machine[:10], (name, title)
            assert text == "just now" or text.startswith("in ") or " ago" in text, (name, text)
        # No time on the page without its zone: every stamp is followed by "UTC".
        bare = chrome.execute_script(
            r"""const stamp = /\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?(?![:\d]| UTC)/g;
            return document.body.innerText.match(stamp) || [];"""
        )
        assert bare == [], (name, bare)
        seen[name] = [text for _, _, text in times]
    for name in ("jobs", "dead job", "delayed job", "running job", "schedules", "workers"):
        assert seen[name], name
    # A delayed job's run and a schedule's next run are ahead: "in …".
    assert any(text.startswith("in 1 h 59 min") for text in seen["delayed job"])
    assert any(text.startswith("in ") for text in seen["schedules"])
    assert any(text.startswith("in 4 min") for text in seen["running job"])  # its lease
    assert any(text.startswith("3 min") and "ago" in text for text in seen["workers"])


def test_the_job_page_shows_its_id_whole_and_copies_it(
    pages: tuple[str, dict[str, str]], chrome: webdriver.Chrome
) -> None:
    url, paths = pages
    job_id = paths["dead job"].rsplit("/", 1)[1]
    chrome.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    chrome.get(url + paths["dead job"])
    assert chrome.find_element(By.ID, "job-id").text == job_id
    family = chrome.execute_script(
        "return getComputedStyle(document.getElementById('job-id')).fontFamily;"
    )
    assert "monospace" in family
    chrome.find_element(By.CSS_SELECTOR, "h1 button.copy").click()
    copied = chrome.execute_async_script(
        """const done = arguments[arguments.length - 1];
        navigator.clipboard.readText().then(done, (e) => done("refused: " + e));"""
    )
    assert copied == job_id
    # In the listing, the short form is monospace too, and the link's title holds it whole.
    chrome.get(url + "/jobs")
    link = chrome.find_element(By.CSS_SELECTOR, f'a[href="/jobs/{job_id}"]')
    assert link.get_attribute("title") == job_id
    assert link.text == "…" + job_id.replace("-", "")[-12:]
