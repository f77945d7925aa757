"""Apply jobrun's schema migrations, in goose's file format and bookkeeping.

The migrations are plain goose SQL files (``migrations/NNNNN_name.sql``) shipped
inside the package, so an installed jobrun can migrate a database without the
source tree, and the versions are recorded in goose's own ``goose_db_version``
table, so the goose CLI can take over a database jobrun migrated (and back).

Invariants:

- Each file runs in one transaction together with its version row, unless it
  says ``-- +goose NO TRANSACTION``; then its statements run one by one in
  autocommit and the version row follows them.
- The run is idempotent and safe when several processes start at once: it holds
  a session-level advisory lock on a fixed key while migrating and re-reads the
  applied versions after taking it.
- A malformed file raises :class:`~jobrun.errors.MigrationError` naming the file,
  before anything is applied.
"""

from __future__ import annotations

import asyncio
import importlib.resources
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg.rows import TupleRow

from jobrun.errors import MigrationError, SchemaMissing
from jobrun.postgres.errors_map import map_error
from jobrun.postgres.goose_files import Migration, load_migrations, migration_versions
from jobrun.postgres.pool import Pool, database_location
from jobrun.sqlc import goose as goose_queries

__all__ = [
    "MIGRATION_LOCK_KEY",
    "MigrationStatus",
    "check_schema",
    "migrate",
    "migration_status",
]

MIGRATION_LOCK_KEY = 0x6A6F6272756E  # "jobrun" in ASCII: the advisory lock key of every run.
"""The ``pg_advisory_lock`` key held while migrating; fixed so all processes agree."""

_LOCK_POLL_SECONDS = 0.05


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """Whether one migration version is applied, as ``jobrun migrate status`` shows it.

    ``file_name`` is None for a version recorded in the database whose file is not
    in this jobrun (a newer jobrun migrated the database).
    """

    version: int
    file_name: str | None
    applied: bool
    applied_at: datetime | None


# -- running ---------------------------------------------------------------------------------


def _bootstrap_sql() -> str:
    return (
        importlib.resources.files("jobrun.postgres")
        .joinpath("goose_bootstrap.sql")
        .read_text(encoding="utf-8")
    )


class _VersionRow(Protocol):
    """The columns of a goose_db_version row the runner reads."""

    @property
    def version_id(self) -> int: ...
    @property
    def is_applied(self) -> bool: ...
    @property
    def tstamp(self) -> datetime | None: ...


def _applied(rows: Iterable[_VersionRow]) -> dict[int, datetime | None]:
    """Goose's rule: the latest row of each version says whether it is applied."""
    latest: dict[int, _VersionRow] = {}
    for row in rows:
        latest[row.version_id] = row
    return {
        version: row.tstamp for version, row in latest.items() if row.is_applied and version != 0
    }


async def _ensure_version_table(conn: psycopg.AsyncConnection[TupleRow]) -> None:
    """Create goose_db_version with goose's version-0 row; caller holds the lock."""
    q = goose_queries.AsyncQuerier(conn)
    async with conn.transaction():
        await conn.execute(_bootstrap_sql().encode())
        if not await q.goose_version_list():
            await q.goose_version_insert(version_id=0, is_applied=True)


async def _apply(conn: psycopg.AsyncConnection[TupleRow], migration: Migration) -> None:
    q = goose_queries.AsyncQuerier(conn)
    statement = ""
    try:
        if migration.use_transaction:
            async with conn.transaction():
                for statement in migration.up:
                    await conn.execute(statement.encode())
                await q.goose_version_insert(version_id=migration.version, is_applied=True)
        else:
            for statement in migration.up:
                await conn.execute(statement.encode())
            await q.goose_version_insert(version_id=migration.version, is_applied=True)
    except psycopg.Error as exc:
        code_lines = [
            ln for ln in statement.splitlines() if ln.strip() and not ln.lstrip().startswith("--")
        ]
        first_line = code_lines[0].strip() if code_lines else ""
        raise MigrationError(
            f"{migration.file_name}: failed at {first_line!r}: {exc}".rstrip()
        ) from exc


async def migrate(pool: Pool, *, source: Traversable | Path | None = None) -> list[int]:
    """Apply every pending migration; return the versions this call applied, in order.

    ``source`` is a directory of goose SQL files (tests pass their own); by default
    jobrun's packaged migrations. Safe to run from several processes at once.
    """
    migrations = load_migrations(source)
    applied_now: list[int] = []
    async with pool.connection() as conn:
        was_autocommit = conn.autocommit
        await conn.set_autocommit(True)
        q = goose_queries.AsyncQuerier(conn)
        # Polled rather than waited for (see GooseLockTry): between tries this
        # session holds no snapshot, so a concurrent runner's CREATE INDEX
        # CONCURRENTLY does not wait on it.
        while not await q.goose_lock_try(lock_key=MIGRATION_LOCK_KEY):  # noqa: ASYNC110 - the lock is another process's
            await asyncio.sleep(_LOCK_POLL_SECONDS)
        try:
            await _ensure_version_table(conn)
            applied = _applied(await q.goose_version_list())
            for migration in migrations:
                if migration.version in applied:
                    continue
                await _apply(conn, migration)
                applied_now.append(migration.version)
        finally:
            await q.goose_lock_release(lock_key=MIGRATION_LOCK_KEY)
            await conn.set_autocommit(was_autocommit)
    return applied_now


async def migration_status(
    pool: Pool, *, source: Traversable | Path | None = None
) -> list[MigrationStatus]:
    """Every known migration version and whether the database has it, by version."""
    migrations = load_migrations(source)
    async with pool.connection() as conn:
        q = goose_queries.AsyncQuerier(conn)
        exists = await q.goose_table_exists()
        applied = _applied(await q.goose_version_list()) if exists else {}
        if not conn.autocommit:
            await conn.rollback()
    files = {m.version: m.file_name for m in migrations}
    return [
        MigrationStatus(
            version=version,
            file_name=files.get(version),
            applied=version in applied,
            applied_at=applied.get(version),
        )
        for version in sorted(files.keys() | applied.keys())
    ]


async def check_schema(pool: Pool, *, source: Traversable | Path | None = None) -> None:
    """Raise SchemaMissing unless every migration of this jobrun is applied to the database.

    Two small reads of goose's table, meant for start-up (``jobrun worker``): a
    process on a database that was never migrated, or that lacks a migration
    this code relies on, fails at once with one clear error instead of failing
    every statement. Versions the database has beyond this jobrun's are fine
    (a newer jobrun migrated it).
    """
    known = migration_versions(source)
    applied: dict[int, datetime | None] = {}
    for attempt in (1, 2):
        borrowed: psycopg.AsyncConnection[Any] | None = None
        try:
            async with pool.connection() as conn:
                borrowed = conn
                q = goose_queries.AsyncQuerier(conn)
                exists = await q.goose_table_exists()
                applied = _applied(await q.goose_version_list()) if exists else {}
                if not conn.autocommit:
                    await conn.rollback()
            break
        except psycopg.Error as exc:
            # A pooled connection the server dropped since the pool opened it
            # (a restart, pg_terminate_backend) fails its first statement;
            # the pool discards it, and one fresh connection decides. A server
            # that cannot be reached fails to lend one at all: said at once.
            if attempt == 1 and borrowed is not None and borrowed.broken:
                continue
            raise map_error(exc, database_location(str(pool.conninfo)), pool) from exc
    pending = tuple(v for v in known if v not in applied)
    if pending:
        dbname = database_location(str(pool.conninfo))[2]
        # None applied: the database was never migrated, say "missing" (no version list).
        raise SchemaMissing(dbname, pending if applied else ())
