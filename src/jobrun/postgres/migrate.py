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
import re
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
from jobrun.postgres.pool import Pool, database_location
from jobrun.sqlc import goose as goose_queries

__all__ = [
    "MIGRATION_LOCK_KEY",
    "Migration",
    "MigrationStatus",
    "check_schema",
    "default_migrations_source",
    "load_migrations",
    "migrate",
    "migration_status",
    "parse_migration",
]

MIGRATION_LOCK_KEY = 0x6A6F6272756E  # "jobrun" in ASCII: the advisory lock key of every run.
"""The ``pg_advisory_lock`` key held while migrating; fixed so all processes agree."""

_LOCK_POLL_SECONDS = 0.05

_FILE_NAME = re.compile(r"^(?P<version>[0-9]+)_(?P<name>[A-Za-z0-9_.\-]+)\.sql$")
_ANNOTATION = re.compile(r"^--\s*\+goose\s+(?P<command>.*?)\s*$", re.IGNORECASE)
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\x80-\uffff]")


@dataclass(frozen=True, slots=True)
class Migration:
    """One parsed migration file: its version, statements and transaction mode."""

    version: int
    file_name: str
    up: tuple[str, ...]
    down: tuple[str, ...]
    use_transaction: bool = True


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


# -- parsing ---------------------------------------------------------------------------------


class _Lexer:
    """Tracks where a SQL text is (code, string, quoted name, dollar quote, comment).

    Fed line by line, so annotations are recognised only at the start of a line
    that begins in plain code, and statements split only on top-level semicolons.
    """

    def __init__(self) -> None:
        self.state = "code"  # code | quote | equote | ident | dollar | block
        self.dollar_tag = ""
        self.block_depth = 0

    def scan(self, line: str, *, split: bool) -> tuple[list[tuple[str, bool]], str, bool]:
        """Scan one line; return (finished statements with has-code flags, rest, rest has code).

        With ``split`` False no statement ends on this line (inside StatementBegin/End).
        """
        finished: list[tuple[str, bool]] = []
        start = 0
        has_code = False
        i = 0
        n = len(line)
        while i < n:
            c = line[i]
            if self.state == "code":
                if line.startswith("--", i):
                    break
                if line.startswith("/*", i):
                    self.state, self.block_depth = "block", 1
                    i += 2
                    continue
                if c == "'":
                    prefix_e = (
                        i > 0
                        and line[i - 1] in "eE"
                        and (i < 2 or not _IDENT_CHAR.match(line[i - 2]))
                    )
                    self.state = "equote" if prefix_e else "quote"
                    has_code = True
                elif c == '"':
                    self.state = "ident"
                    has_code = True
                elif c == "$" and (i == 0 or not _IDENT_CHAR.match(line[i - 1])):
                    m = _DOLLAR_TAG.match(line, i)
                    if m:
                        self.state, self.dollar_tag = "dollar", m.group(0)
                        has_code = True
                        i = m.end()
                        continue
                    has_code = True
                elif c == ";" and split:
                    finished.append((line[start : i + 1], has_code))
                    start, has_code = i + 1, False
                elif not c.isspace():
                    has_code = True
                i += 1
            elif self.state in ("quote", "equote"):
                if c == "\\" and self.state == "equote":
                    i += 2
                    continue
                if c == "'":
                    if line.startswith("''", i):
                        i += 2
                        continue
                    self.state = "code"
                i += 1
            elif self.state == "ident":
                if c == '"':
                    if line.startswith('""', i):
                        i += 2
                        continue
                    self.state = "code"
                i += 1
            elif self.state == "dollar":
                if line.startswith(self.dollar_tag, i):
                    self.state = "code"
                    i += len(self.dollar_tag)
                    continue
                i += 1
            else:  # block comment, nestable in PostgreSQL
                if line.startswith("/*", i):
                    self.block_depth += 1
                    i += 2
                    continue
                if line.startswith("*/", i):
                    self.block_depth -= 1
                    if self.block_depth == 0:
                        self.state = "code"
                    i += 2
                    continue
                i += 1
        return finished, line[start:], has_code


def parse_migration(file_name: str, text: str) -> Migration:
    """Parse one goose SQL migration; raise MigrationError naming the file when malformed.

    Supported annotations: ``Up``, ``Down``, ``StatementBegin`` / ``StatementEnd``
    (everything between them is one statement) and ``NO TRANSACTION``.
    """
    m = _FILE_NAME.match(file_name)
    if not m:
        raise MigrationError(
            f"{file_name}: a migration file name must look like 00001_description.sql"
        )
    version = int(m.group("version"))
    if version < 1:
        raise MigrationError(f"{file_name}: migration versions start at 1")
    return _MigrationParser(file_name).parse(version, text)


_UNCLOSED = {
    "quote": "a string",
    "equote": "a string",
    "ident": "a quoted identifier",
    "block": "a /* comment",
}


class _MigrationParser:
    """One file's walk: the section it is in, the statement being gathered, the lexer."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.sections: dict[str, list[str]] = {"up": [], "down": []}
        self.section: str | None = None
        self.seen: set[str] = set()
        self.use_transaction = True
        self.lexer = _Lexer()
        self.in_block = False
        self.block_start = 0
        self.buffer: list[str] = []
        self.buffer_has_code = False

    def fail(self, lineno: int, why: str) -> MigrationError:
        return MigrationError(f"{self.file_name}:{lineno}: {why}")

    def parse(self, version: int, text: str) -> Migration:
        lines = text.splitlines()
        for lineno, line in enumerate(lines, start=1):
            annotation = _ANNOTATION.match(line.strip()) if self.lexer.state == "code" else None
            if annotation:
                self.annotate(lineno, annotation.group("command"))
            else:
                self.add_line(lineno, line)
        last = len(lines)
        if self.lexer.state != "code":
            what = _UNCLOSED.get(self.lexer.state) or f"a {self.lexer.dollar_tag} quoted body"
            raise self.fail(last, f"the file ends inside {what}")
        if "up" not in self.seen:
            raise MigrationError(f"{self.file_name}: no '-- +goose Up' annotation")
        self.close_section(last)
        return Migration(
            version=version,
            file_name=self.file_name,
            up=tuple(self.sections["up"]),
            down=tuple(self.sections["down"]),
            use_transaction=self.use_transaction,
        )

    def reset_buffer(self) -> None:
        self.buffer, self.buffer_has_code = [], False

    def close_section(self, lineno: int) -> None:
        if self.in_block:
            raise self.fail(self.block_start, "StatementBegin without a matching StatementEnd")
        if self.buffer_has_code:
            raise self.fail(lineno, "the last statement of the section does not end with ';'")
        self.reset_buffer()

    def annotate(self, lineno: int, written: str) -> None:
        command = " ".join(written.split()).lower()
        if command in ("up", "down"):
            self.open_section(lineno, command)
        elif command == "statementbegin":
            if self.section is None:
                raise self.fail(lineno, "StatementBegin before '-- +goose Up'")
            if self.in_block:
                raise self.fail(lineno, "StatementBegin inside another StatementBegin")
            if self.buffer_has_code:
                raise self.fail(lineno, "the statement before StatementBegin does not end with ';'")
            self.in_block, self.block_start = True, lineno
            self.reset_buffer()
        elif command == "statementend":
            if not self.in_block or self.section is None:
                raise self.fail(lineno, "StatementEnd without StatementBegin")
            if self.buffer_has_code:
                self.sections[self.section].append("\n".join(self.buffer).strip())
            self.in_block = False
            self.reset_buffer()
        elif command == "no transaction":
            self.use_transaction = False
        else:
            raise self.fail(lineno, f"unknown annotation '-- +goose {written}'")

    def open_section(self, lineno: int, command: str) -> None:
        if command in self.seen:
            raise self.fail(lineno, f"more than one '-- +goose {command.title()}'")
        if command == "up" and "down" in self.seen:
            raise self.fail(lineno, "'-- +goose Up' must come before '-- +goose Down'")
        if self.section is not None:
            self.close_section(lineno)
        self.section = command
        self.seen.add(command)

    def add_line(self, lineno: int, line: str) -> None:
        finished, rest, rest_has_code = self.lexer.scan(line, split=not self.in_block)
        if self.section is None:
            if finished or rest_has_code:
                raise self.fail(lineno, "SQL before '-- +goose Up'")
            return
        for part, part_has_code in finished:
            self.buffer.append(part)
            if self.buffer_has_code or part_has_code:
                self.sections[self.section].append("\n".join(self.buffer).strip())
            self.reset_buffer()
        if finished and not rest_has_code:
            rest = ""  # a comment trailing a statement on its line belongs to that statement
        if rest.strip() or self.buffer:
            self.buffer.append(rest)
        self.buffer_has_code = self.buffer_has_code or rest_has_code


def default_migrations_source() -> Traversable:
    """The migrations shipped with jobrun: inside the wheel, else the source tree's.

    A wheel carries them as ``jobrun/migrations`` (pyproject force-includes them);
    an editable install runs from ``src/jobrun``, next to the repository's
    ``migrations/`` directory.
    """
    packaged = importlib.resources.files("jobrun") / "migrations"
    if packaged.is_dir():
        return packaged
    repository = Path(__file__).resolve().parents[3] / "migrations"
    if repository.is_dir():
        return repository
    raise MigrationError("jobrun's migrations are missing from this installation")


def load_migrations(source: Traversable | Path | None = None) -> list[Migration]:
    """Parse every ``*.sql`` file of ``source`` (default: jobrun's own), by version."""
    root = default_migrations_source() if source is None else source
    migrations: dict[int, Migration] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or not entry.is_file():
            continue
        migration = parse_migration(entry.name, entry.read_text(encoding="utf-8"))
        if migration.version in migrations:
            other = migrations[migration.version].file_name
            raise MigrationError(
                f"{entry.name}: version {migration.version} is also used by {other}"
            )
        migrations[migration.version] = migration
    return [migrations[v] for v in sorted(migrations)]


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
    known = [m.version for m in load_migrations(source)]
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
