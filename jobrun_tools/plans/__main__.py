"""``scripts/plans``: write (or, with ``--check``, compare) every query's plan at scale.

Exit status: 0 when every file is as committed (``--check``) or written, and
every rule holds; 1 when a plan differs from the committed one, a rule is
broken or a case fails; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from jobrun_tools.plans.build import build, scale_database
from jobrun_tools.plans.catalog import QUERY_SETS, ROOT
from jobrun_tools.plans.report import compare, plan_queries, write

DEFAULT_JOBS = 1_000_000
"""The scale of the committed plans."""

MIGRATIONS_FOLDER = Path("db") / "plans" / "migrations"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/plans",
        description=(
            "Build a database of --jobs jobs, plan every query of db/query and of the "
            "detector on it, check each query's plan rules, review every migration, and "
            "write the plans under db/plans (or compare them with --check)."
        ),
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed files instead of writing them; print the diffs",
    )
    parser.add_argument(
        "--database-url",
        help="build on this server (a scratch database, dropped after) instead of a private "
        "embedded one; its user needs CREATE DATABASE",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        help=f"jobs in the scale database (default {DEFAULT_JOBS:,}, the committed plans' scale; "
        "another scale needs --out)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write (or compare) the plan folders under this directory instead of the repository",
    )
    parser.add_argument(
        "--query",
        action="append",
        default=[],
        metavar="NAME",
        help="only this query (repeatable); the migration review is then skipped",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the scratch database (--database-url)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the report; see the module's docstring for the exit status."""
    args = _parser().parse_args(argv)
    out = (args.out or ROOT).resolve()
    if args.jobs < 1000:
        print("scripts/plans: --jobs must be at least 1,000", file=sys.stderr)
        return 2
    if args.jobs != DEFAULT_JOBS and out == ROOT:
        print(
            f"scripts/plans: the committed plans are at {DEFAULT_JOBS:,} jobs; "
            "write or compare another scale with --out DIR",
            file=sys.stderr,
        )
        return 2
    started = time.perf_counter()
    with scale_database(args.database_url, keep=args.keep) as url:
        built = build(url, args.jobs)
        header = (
            f"Estimated plans on the scale database ({args.jobs:,} jobs, PostgreSQL "
            f"{built.server_major}), written by scripts/plans: do not edit."
        )
        outcome = plan_queries(url, built.now, header, only=args.query)
    scale = f"{args.jobs:,} jobs, PostgreSQL {built.server_major}"
    if not args.query:
        for review in built.reviews:
            name = Path(review.migration.file_name).with_suffix(".txt")
            outcome.files[MIGRATIONS_FOLDER / name] = "\n".join([*review.lines(scale), ""])
    folders = [q.plans.relative_to(ROOT) for q in QUERY_SETS]
    print("the cases that touched the most buffers, executed (measured, not written):")
    for _, line in sorted(outcome.figures, reverse=True)[:8]:
        print(f"  {line}")
    status = 0
    for message in outcome.failures + outcome.violations:
        print(message, file=sys.stderr)
        status = 1
    if args.check:
        diffs = compare(outcome.files, out, folders, partial=bool(args.query))
        for diff in diffs:
            print(diff, file=sys.stderr)
        if diffs:
            print(
                f"scripts/plans --check: {len(diffs)} plan file(s) differ from the committed "
                "ones; if the change is meant, run scripts/plans and commit the files",
                file=sys.stderr,
            )
            status = 1
    else:
        changed = write(outcome.files, out, folders, partial=bool(args.query))
        print(f"wrote {changed} changed file(s) under {out}")
    print(
        f"scripts/plans: {len(outcome.files)} files, {len(outcome.violations)} broken rule(s), "
        f"{time.perf_counter() - started:.0f} s ({scale})"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
