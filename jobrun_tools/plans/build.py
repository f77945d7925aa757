"""The scale database: a server to build it on, and the build itself.

By default the report starts its own embedded server (the pinned ``pgserver``
wheel, so every machine plans with the same PostgreSQL) in a temporary
directory and deletes it afterwards; ``--database-url`` names another server,
on which a scratch database is created and dropped.

The build, in order: migration 00001 on an empty database; the set-based
fills of jobs, job_events, processed_effects and schedules
(``jobrun_tools/query/scale.sql``); a VACUUM, as a live database has had;
every later migration, reviewed (:mod:`jobrun_tools.plans.review`); the
queue controls, handoff offers, results, uniqueness keys, worker rows and
dependencies;
the detector's migrations and tables;
then autovacuum off on every table and one VACUUM (ANALYZE) with
``default_statistics_target`` at its maximum, 10,000: ANALYZE then samples
3,000,000 rows per table, every row of a table that has no more, and a full
sample leaves nothing to chance. Statistics from a random sample would move
estimates, and now and then a plan, from one build to the next.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

import psycopg

from jobrun.postgres.goose_files import Migration, load_migrations
from jobrun.sqlc import goose as goose_queries
from jobrun.sqlc import system as system_queries
from jobrun.testing.databases import create_database, drop_database
from jobrun_tools.plans.catalog import ROOT
from jobrun_tools.plans.review import MigrationReview, apply_reviewed
from jobrun_tools.sqlc import scale as scale_queries
from jobrun_tools.sqlc import scale_detector as detector_queries

__all__ = ["DETECTOR_NOW_MS", "FULL_SAMPLE_TARGET", "Build", "build", "scale_database"]

FULL_SAMPLE_TARGET = 10_000
"""The statistics target of the build's ANALYZE: 300 x 10,000 rows sampled per table."""

DETECTOR_MIGRATIONS = ROOT / "examples" / "detector" / "migrations"

DETECTOR_NOW_MS = 1_750_000_000_000
"""The detector's clock in the scale database (epoch milliseconds), fixed: its
queries take every time as a parameter and never read the database's clock,
so its rows and its cases' parameters, printed in its plans, never change."""


@dataclass(frozen=True, slots=True)
class Build:
    """A built scale database."""

    now: datetime
    """The database clock when the build began: every row's times are relative to it."""
    jobs: int
    server_major: int
    reviews: list[MigrationReview]
    seconds: float


@contextlib.contextmanager
def scale_database(database_url: str | None, *, keep: bool = False) -> Iterator[str]:
    """The URL of a fresh, empty database for the build, removed after the block.

    ``database_url`` None: a private embedded server in a temporary directory.
    Otherwise a scratch database on that server (its user needs CREATE
    DATABASE); ``keep`` leaves it in place and prints nothing about it.
    """
    if database_url is not None:
        name, url = create_database(database_url, prefix="jobrun_plans_")
        try:
            yield url
        finally:
            if not keep:
                drop_database(database_url, name)
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver
    data_dir = Path(tempfile.mkdtemp(prefix="jobrun-plans-pg-"))
    try:
        server = pgserver.get_server(data_dir, cleanup_mode="delete")
        try:
            name, url = create_database(str(server.get_uri()), prefix="jobrun_plans_")
            yield url
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _bootstrap(conn: psycopg.Connection[Any]) -> None:
    bootstrap = files("jobrun.postgres").joinpath("goose_bootstrap.sql").read_text("utf-8")
    with conn.transaction():
        conn.execute(bootstrap.encode())
        goose_queries.Querier(conn).goose_version_insert(version_id=0, is_applied=True)


def _apply(conn: psycopg.Connection[Any], migration: Migration) -> None:
    goose = goose_queries.Querier(conn)
    if migration.use_transaction:
        with conn.transaction():
            for statement in migration.up:
                conn.execute(statement.encode())
            goose.goose_version_insert(version_id=migration.version, is_applied=True)
    else:
        for statement in migration.up:
            conn.execute(statement.encode())
        goose.goose_version_insert(version_id=migration.version, is_applied=True)


def build(url: str, jobs: int, *, say: Any = print) -> Build:
    """Build the scale database of ``jobs`` jobs in the empty database at ``url``."""
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        scale = scale_queries.Querier(conn)
        now = system_queries.Querier(conn).database_now()
        assert now is not None
        version = scale.scale_server_version()
        assert version is not None
        migrations = load_migrations(ROOT / "migrations")
        _bootstrap(conn)
        _apply(conn, migrations[0])
        scale.scale_tables_autovacuum_off()

        step = time.perf_counter()
        filled = scale.scale_fill_jobs(now=now, jobs=jobs)
        events = scale.scale_fill_events()
        effects = scale.scale_fill_effects(now=now, jobs=jobs)
        schedules = scale.scale_fill_schedules(now=now, jobs=jobs)
        scale.scale_vacuum()
        say(
            f"filled {filled:,} jobs, {events:,} events, {effects:,} ledger rows, "
            f"{schedules:,} schedules ({time.perf_counter() - step:.1f} s)"
        )

        step = time.perf_counter()
        reviews = []
        for migration in migrations[1:]:
            reviews.append(apply_reviewed(conn, migration))
            scale.scale_tables_autovacuum_off()
        say(f"applied {len(reviews)} migrations ({time.perf_counter() - step:.1f} s)")
        for review in reviews:
            say(f"  {review.migration.file_name}: {review.seconds:.2f} s")

        scale.scale_fill_queues()
        scale.scale_fill_offers(now=now)
        scale.scale_fill_results()
        scale.scale_fill_unique()
        scale.scale_fill_workers(now=now)
        scale.scale_fill_dependencies(now=now)
        scale.scale_fill_waits()
        scale.scale_fill_concurrency(now=now)
        scale.scale_fill_stats(now=now)
        for migration in load_migrations(DETECTOR_MIGRATIONS):
            _apply(conn, migration)
        _fill_detector(conn, jobs // 5)

        step = time.perf_counter()
        scale.scale_tables_autovacuum_off()
        scale.scale_setting(name="default_statistics_target", value=str(FULL_SAMPLE_TARGET))
        scale.scale_vacuum_analyze()
        say(f"vacuumed and analyzed ({time.perf_counter() - step:.1f} s)")
    return Build(now, jobs, version // 10_000, reviews, time.perf_counter() - started)


def _fill_detector(conn: psycopg.Connection[Any], events: int) -> None:
    q = detector_queries.Querier(conn)
    now_ms = DETECTOR_NOW_MS
    q.scale_fill_detector_events(now_ms=now_ms, events=events)
    q.scale_fill_detector_hits()
    q.scale_fill_detector_counters()
    q.scale_fill_detector_decisions()
    q.scale_fill_detector_agents(events=events)
    q.scale_fill_detector_intents(events=events)
    q.scale_fill_detector_snapshots(now_ms=now_ms, events=events)
