"""Does every dashboard page answer in bounded time on a big table? Printed as one table.

``scripts/bench-pages`` builds the plan report's scale database
(:func:`jobrun_tools.plans.build.build`: by default 10,000,000 jobs, mostly
succeeded, with dead, cancelled, queued, leased, waiting and keyed jobs, a
week of the charts' rows, schedules and workers), starts ``jobrun web`` on
it as users run it (a subprocess on a loopback port), and then, in
``--rounds`` rounds that visit the pages in a rotating order, times one
GET of every page and API call over a real socket. It prints, per page,
the median and the slowest time, the status and the size of the answer.

A page whose work grows with the table shows here as seconds instead of
milliseconds: every page's queries are also held to plan rules on a million
jobs by ``scripts/plans --check``; this measures the whole page, template
and all, at ten times that.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from jobrun_tools.plans.build import build, scale_database

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _serve(url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobrun", "web", "--database-url", url, "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(base + "/api/csrf", timeout=2)
            return proc, base
        except httpx.TransportError:
            if proc.poll() is not None:
                raise SystemExit("bench-pages: jobrun web exited at start") from None
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("bench-pages: jobrun web did not answer within 60 s")


def _pages(base: str) -> list[str]:
    """Every page and API call, with ids taken from the database through the API."""

    def first_id(state: str) -> str | None:
        jobs = httpx.get(f"{base}/api/jobs", params={"state": state, "limit": "1"}, timeout=60)
        found = jobs.json().get("jobs", [])
        return str(found[0]["id"]) if found else None

    pages = [
        "/",
        "/fragments/overview",
        "/api/overview",
        "/jobs",
        "/jobs?state=succeeded",
        "/jobs?state=dead",
        "/jobs?state=queued",
        "/jobs?state=waiting",
        "/jobs?queue=emails",
        "/jobs?type=send_email",
        "/jobs?queue=emails&state=dead",
        "/api/jobs",
        "/api/jobs?state=dead",
        "/schedules",
        "/api/schedules",
        "/queues",
        "/api/queues",
        "/workers",
        "/api/workers",
        "/stats",
        "/stats?window=day",
        "/stats?window=week",
        "/stats?window=week&queue=emails",
        "/api/stats?window=week",
    ]
    for state in ("dead", "succeeded", "waiting"):
        job_id = first_id(state)
        if job_id is not None:
            pages += [f"/jobs/{job_id}", f"/api/jobs/{job_id}"]
            if state == "waiting":
                pages.append(f"/workflows/{quote(job_id)}")
    return pages


def main(argv: list[str] | None = None) -> int:
    """Build, serve, time every page, print the table."""
    parser = argparse.ArgumentParser(prog="scripts/bench-pages", description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000_000, help="jobs in the table")
    parser.add_argument("--rounds", type=int, default=5, help="GETs of each page")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("JOBRUN_DATABASE_URL"),
        help="build on this server (a scratch database, dropped after) instead of a "
        "private embedded one",
    )
    args = parser.parse_args(argv)
    with scale_database(args.database_url) as url:
        built = build(url, args.jobs, say=lambda line: print(line, flush=True))
        proc, base = _serve(url)
        try:
            pages = _pages(base)
            times: dict[str, list[float]] = {page: [] for page in pages}
            answers: dict[str, tuple[int, int]] = {}
            with httpx.Client(timeout=300) as http:
                for round_ in range(args.rounds):
                    shift = round_ % len(pages)
                    for page in pages[shift:] + pages[:shift]:
                        started = time.perf_counter()
                        answer = http.get(base + page)
                        times[page].append((time.perf_counter() - started) * 1000)
                        answers[page] = (answer.status_code, len(answer.content))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(
        f"\n{built.jobs:,} jobs, PostgreSQL {built.server_major}, built in "
        f"{built.seconds:.0f} s; {args.rounds} GETs of each page, rotating order\n"
    )
    print("| page | median | slowest | status | bytes |")
    print("|---|---:|---:|---:|---:|")
    for page in pages:
        status, size = answers[page]
        print(
            f"| `{page}` | {statistics.median(times[page]):,.1f} ms | "
            f"{max(times[page]):,.1f} ms | {status} | {size:,} |"
        )
    bad = [page for page in pages if answers[page][0] != 200]
    if bad:
        print(f"bench-pages: not 200: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
