"""The ``detector`` command: run a worker, migrate a laboratory.

Commands:

- ``worker --database-url URL [--naive] [--concurrency N]``: one worker
  process running detection and delivery jobs until SIGTERM (the signing key
  comes from ``DETECTOR_SIGNING_KEY``, hex);
- ``migrate-from-sqlite LAB.db --database-url URL [--force]``: copy a
  laboratory into PostgreSQL and verify it (:mod:`detector.migrate_lab`);
- ``demo [--database-url URL]``: the whole pipeline over loopback sockets with
  simulated nodes and agents, ending with a table of checks; exit code 1 when
  one fails (:mod:`detector.demo`; a fresh database on the embedded server
  unless a URL is given).

Errors are one ``error:`` line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Parse ``argv`` and run the command."""
    parser = argparse.ArgumentParser(prog="detector")
    sub = parser.add_subparsers(dest="command", required=True)
    worker = sub.add_parser("worker", help="run detection and delivery jobs until SIGTERM")
    worker.add_argument("--database-url", default=os.environ.get("JOBRUN_DATABASE_URL"))
    worker.add_argument("--naive", action="store_true", help="the race test's negative control")
    worker.add_argument("--concurrency", type=int, default=8)
    mig = sub.add_parser("migrate-from-sqlite", help="copy a SQLite laboratory into PostgreSQL")
    mig.add_argument("lab")
    mig.add_argument("--database-url", default=os.environ.get("JOBRUN_DATABASE_URL"))
    mig.add_argument("--force", action="store_true", help="run onto a non-empty database")
    demo = sub.add_parser("demo", help="run the pipeline with simulated nodes and agents")
    demo.add_argument("--database-url", default=os.environ.get("JOBRUN_DATABASE_URL"))
    demo.add_argument("--nodes", type=int, default=4)
    demo.add_argument("--agents", type=int, default=3)
    demo.add_argument("--workers", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            from rich.console import Console

            from detector.demo import run_demo

            ok = asyncio.run(
                run_demo(
                    args.database_url,
                    console=Console(),
                    nodes=args.nodes,
                    agents=args.agents,
                    workers=args.workers,
                )
            )
            if not ok:
                sys.exit(1)
        elif args.command == "worker":
            from detector.postgres import run_worker_process

            asyncio.run(
                run_worker_process(
                    _url(args.database_url), naive=args.naive, concurrency=args.concurrency
                )
            )
        else:
            from detector.migrate_lab import migrate_from_sqlite

            report = asyncio.run(
                migrate_from_sqlite(args.lab, _url(args.database_url), force=args.force)
            )
            print(report.summary())
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


def _url(given: str | None) -> str:
    from jobrun.postgres import resolve_database_url

    return resolve_database_url(given)
