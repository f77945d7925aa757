"""`jobrun web` shows what `jobrun demo` did, as a user runs the two from a clean clone.

The quick start runs the demo, then the dashboard, with no database
configured: both must land on the embedded server's database, so the second
command sees the first one's jobs. That is checked in a data directory of its
own (``JOBRUN_EMBEDDED_DIR``), which also proves the data outlives the
embedded server: it stops when the demo exits, and ``jobrun web`` starts it
again. The same pair is then checked against the test server with
``--database-url``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from jobrun.testing import eventually_sync

ROOT = Path(__file__).resolve().parents[2]


def run_demo(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "demo", "--jobs", "20", "--workers", "1", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**env, "COLUMNS": "250"},
    )
    assert result.returncode == 0, (result.stdout, result.stderr)
    found = re.search(r"in queue '(demo_[0-9_]+)'", result.stdout)
    assert found is not None, result.stdout
    assert "see these jobs in the dashboard: jobrun web" in result.stdout
    return found[1]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def dashboard_pages(env: dict[str, str], queue: str, *args: str) -> dict[str, str]:
    """Start `jobrun web`, fetch the pages that must show the demo, stop it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrun", "web", "--port", str(port), *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    pages: dict[str, str] = {}
    try:
        # Starting may include starting the embedded server again: wait for it.
        def fetched() -> httpx.Response | None:
            try:
                return httpx.get(base + "/", timeout=5)
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                return None

        overview = eventually_sync(fetched, within=60, what="jobrun web started")
        assert overview.status_code == 200
        pages["/"] = overview.text
        for path in (f"/jobs?queue={queue}", f"/jobs?queue={queue}&state=dead", "/api/overview"):
            response = httpx.get(base + path, timeout=10)
            assert response.status_code == 200, (path, response.text)
            pages[path] = response.text
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    return pages


def check_pages(pages: dict[str, str], queue: str) -> None:
    assert queue in pages["/"]
    assert queue in pages["/api/overview"]
    jobs = pages[f"/jobs?queue={queue}"]
    assert "demo.work" in jobs and "succeeded" in jobs
    # The demo leaves dead jobs on purpose (the doomed ones) and cancels one.
    dead = pages[f"/jobs?queue={queue}&state=dead"]
    assert "demo.doomed" in dead
    assert "demo.work" not in dead


@pytest.fixture
def embedded_dir() -> Iterator[Path]:
    # Short, under /tmp: the server's Unix socket path must fit in 107 bytes.
    directory = Path(tempfile.mkdtemp(prefix="jobrun-webdemo-", dir="/tmp"))
    try:
        yield directory
    finally:
        if (directory / "postmaster.pid").exists():  # a process was killed, not stopped
            import pgserver

            pgserver.get_server(directory, cleanup_mode="delete").cleanup()
        shutil.rmtree(directory, ignore_errors=True)


def test_web_shows_the_demo_on_the_embedded_server_with_nothing_configured(
    embedded_dir: Path,
) -> None:
    pytest.importorskip("pgserver")
    env = {k: v for k, v in os.environ.items() if k != "JOBRUN_DATABASE_URL"}
    env["JOBRUN_EMBEDDED_DIR"] = str(embedded_dir)
    queue = run_demo(env)
    check_pages(dashboard_pages(env, queue), queue)


def test_web_shows_the_demo_on_the_same_database_url(db_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JOBRUN_DATABASE_URL"}
    queue = run_demo(env, "--database-url", db_url)
    check_pages(dashboard_pages(env, queue, "--database-url", db_url), queue)
