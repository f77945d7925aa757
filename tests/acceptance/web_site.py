"""``jobrun web`` as a subprocess on a free port, for tests that talk to it over a real socket."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx

from jobrun.testing import eventually_sync

ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "ops", "browser-test-pass"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(db_url: str, *extra: str, auth: bool = True) -> tuple[subprocess.Popen[str], str]:
    """Start ``jobrun web`` (Basic auth USER/PASSWORD unless not ``auth``); return it, its URL."""
    port = free_port()
    credentials = ["--user", USER, "--password", PASSWORD] if auth else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrun", "web", "--database-url", db_url,
         "--port", str(port), *credentials, *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        try:
            httpx.get(url + "/", timeout=1)
        except httpx.TransportError:
            assert proc.poll() is None, proc.communicate()
            return False
        return True

    try:
        eventually_sync(serving, what="jobrun web started")
    except AssertionError:
        stop(proc)
        raise
    return proc, url


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
