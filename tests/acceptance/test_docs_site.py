"""The documentation site builds and renders: its home page and an API page in Chromium.

The site is built by ``mkdocs build --strict`` (as ``.ci/run`` builds it) into
a temporary directory, served over HTTP on the loopback, and opened in
Debian's headless chromium through Selenium, as the dashboard's browser tests
do. Each page's screenshot is saved as a test artifact in
``$JOBRUN_TEST_ARTIFACTS/screenshots``; with ``JOBRUN_UPDATE_SCREENSHOTS=1``
it replaces the copy in ``docs/screenshots/`` (``site-*.png``) that reviewers
look at, so a plain test run never changes the working tree.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

ROOT = Path(__file__).resolve().parents[2]
SHOTS = (
    ROOT / "docs" / "screenshots"
    if os.environ.get("JOBRUN_UPDATE_SCREENSHOTS") == "1"
    else Path(os.environ.get("JOBRUN_TEST_ARTIFACTS") or "/tmp/jobrun-test-artifacts")
    / "screenshots"
)
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def chrome() -> Iterator[webdriver.Chrome]:
    assert Path(CHROMIUM).exists(), f"{CHROMIUM} missing: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def test_the_home_page_renders_with_its_navigation(site: str, chrome: webdriver.Chrome) -> None:
    chrome.get(site)
    assert chrome.find_element(By.CSS_SELECTOR, "article h1").text == "jobrun"
    tabs = chrome.find_element(By.CSS_SELECTOR, "nav.md-nav--primary").text
    for section in ("Getting started", "Guide", "Operating", "Reference", "Benchmarks"):
        assert section in tabs
    # The theme's stylesheet applied: the header bar is laid out, not a bare list.
    header = chrome.find_element(By.CSS_SELECTOR, "header.md-header")
    assert header.size["height"] > 30
    shot(chrome, "site-home")


def test_an_api_reference_page_renders_the_docstrings(site: str, chrome: webdriver.Chrome) -> None:
    chrome.get(site + "reference/python/client/")
    headings = [e.text for e in chrome.find_elements(By.CSS_SELECTOR, ".doc-heading")]
    assert any("jobrun.Client" in h for h in headings), headings
    body = chrome.find_element(By.CSS_SELECTOR, "article").text
    assert "run_worker" in body and "enqueue_many" in body
    assert ":class:" not in body  # Sphinx roles are rendered as code, not shown raw
    shot(chrome, "site-reference")
