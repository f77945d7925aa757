"""The migration review: what each migration locks, rewrites and reads on a full database.

squawk reads a migration's text; this runs it. The report builds its scale
database at migration 00001, fills it, then applies every later migration
through :func:`apply_reviewed`, statement by statement, and records for each
statement what the session that ran it saw: the locks it holds on tables and
indexes that existed before the migration, the relations it rewrote (a new
storage file), and the rows it read and wrote (``pg_stat_xact_user_tables``).
A statement of a ``NO TRANSACTION`` file runs in a transaction of its own, so
its locks can be read before it commits (what it locks is the same);
``CONCURRENTLY`` cannot run in one and is described by what PostgreSQL
documents it takes. Everything written is a function of the data, so the
committed review changes only when a migration or the data does; the
statements' durations vary from run to run and are printed, not written.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from jobrun.postgres.goose_files import Migration
from jobrun.sqlc import goose as goose_queries
from jobrun_tools.sqlc import review as review_queries

__all__ = ["MigrationReview", "StatementReview", "apply_reviewed"]

# Lock modes that stop other sessions' writes (they conflict with ROW
# EXCLUSIVE), and the one that stops their reads too.
_BLOCK_WRITES = frozenset(
    {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
)
_BLOCK_READS = "AccessExclusiveLock"
_CONCURRENT = re.compile(r"\bCONCURRENTLY\b", re.I)
_ON_TABLE = re.compile(r"\bON\s+(\w+)", re.I)
_PLAIN_INDEX = re.compile(r"\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)", re.I)
_INDEX_NAME = re.compile(r"\bINDEX\s+CONCURRENTLY\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(\w+)", re.I)


def _mode(mode: str) -> str:
    """``AccessExclusiveLock`` as the documentation names it: ACCESS EXCLUSIVE."""
    words = re.findall(r"[A-Z][a-z]+", mode.removesuffix("Lock"))
    return " ".join(words).upper()


def _effect(mode: str) -> str:
    if mode == _BLOCK_READS:
        return "blocks reads and writes"
    return "blocks writes" if mode in _BLOCK_WRITES else "blocks neither reads nor writes"


@dataclass(slots=True)
class StatementReview:
    """What one statement of a migration did to the relations that existed before it."""

    text: str
    locks: list[str] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    """Measured; printed, never written to the review file."""


@dataclass(slots=True)
class MigrationReview:
    """The review of one migration file."""

    migration: Migration
    statements: list[StatementReview]

    @property
    def seconds(self) -> float:
        """The migration's measured duration (printed, not written)."""
        return sum(s.seconds for s in self.statements)

    def lines(self, scale: str) -> list[str]:
        """The review as the text written to ``<plans>/migrations/<file>.txt``."""
        m = self.migration
        mode = (
            "one transaction" if m.use_transaction else "no transaction (-- +goose NO TRANSACTION)"
        )
        out = [
            f"# {m.file_name} applied to the scale database ({scale})",
            f"# written by scripts/plans; runs in {mode}",
            "",
        ]
        blocked: list[str] = []
        for number, statement in enumerate(self.statements, start=1):
            out.append(f"{number}. {statement.text}")
            for label, items in (
                ("locks", statement.locks),
                ("rewrites", statement.rewrites),
                ("reads", statement.reads),
                ("writes", statement.writes),
                ("note", statement.notes),
            ):
                if items:
                    out.append(f"   {label}: {'; '.join(items)}")
            if not (statement.locks or statement.rewrites or statement.reads):
                out.append("   touches no table that existed before the migration")
            blocked.extend(statement.blocks)
        out.append("")
        if not blocked:
            out.append("verdict: blocks no reads or writes of an existing table")
        else:
            held = "until the migration commits" if m.use_transaction else "for its statement"
            out.append(f"verdict: {'; '.join(dict.fromkeys(blocked))}, each held {held}")
        return out


def _first_line(statement: str) -> str:
    code = [
        ln.strip()
        for ln in statement.splitlines()
        if ln.strip() and not ln.strip().startswith("--")
    ]
    text = code[0] if code else ""
    return text if len(text) <= 100 else text[:97] + "..."


def apply_reviewed(conn: psycopg.Connection[Any], migration: Migration) -> MigrationReview:
    """Apply ``migration`` on an autocommit ``conn`` as jobrun's runner would, reviewing it."""
    q = review_queries.Querier(conn)
    existing = {r.name: r for r in q.review_relations()}
    reviews: list[StatementReview] = []
    if migration.use_transaction:
        with conn.transaction():
            for statement in migration.up:
                reviews.append(_reviewed(conn, statement, existing))
            goose_queries.Querier(conn).goose_version_insert(
                version_id=migration.version, is_applied=True
            )
    else:
        for statement in migration.up:
            if _CONCURRENT.search(statement):
                reviews.append(_concurrent(conn, statement, existing))
            else:
                with conn.transaction():
                    reviews.append(_reviewed(conn, statement, existing))
        goose_queries.Querier(conn).goose_version_insert(
            version_id=migration.version, is_applied=True
        )
    return MigrationReview(migration, reviews)


def _reviewed(
    conn: psycopg.Connection[Any], statement: str, existing: dict[str, Any]
) -> StatementReview:
    q = review_queries.Querier(conn)
    locks_before = {(r.name, r.mode) for r in q.review_locks()}
    files_before = {r.name: r.file_node for r in q.review_relations()}
    activity_before = {r.name: r for r in q.review_table_activity()}
    started = time.perf_counter()
    conn.execute(statement.encode())
    seconds = time.perf_counter() - started
    review = StatementReview(_first_line(statement), seconds=seconds)
    strongest: dict[str, str] = {}
    for name, mode in sorted({(r.name, r.mode) for r in q.review_locks()} - locks_before):
        if name in existing and existing[name].kind in ("r", "p", "m"):
            strongest.setdefault(name, mode)
            if _rank(mode) > _rank(strongest[name]):
                strongest[name] = mode
    for name, mode in sorted(strongest.items()):
        review.locks.append(f"{_mode(mode)} on {name} ({_effect(mode)})")
        if mode in _BLOCK_WRITES:
            review.blocks.append(f"{_effect(mode)} of {name}")
    files_after = {r.name: r.file_node for r in q.review_relations()}
    for name, node in sorted(files_before.items()):
        if name in existing and name in files_after and files_after[name] != node:
            review.rewrites.append(f"{name} ({existing[name].tuples:,} rows)")
        elif name in existing and name not in files_after:
            review.writes.append(f"drops {name}")
    for row in q.review_table_activity():
        if row.name not in existing:
            continue
        before = activity_before.get(row.name)
        seq = row.seq_scans - (before.seq_scans if before else 0)
        seq_rows = row.seq_rows - (before.seq_rows if before else 0)
        index = row.index_scans - (before.index_scans if before else 0)
        written = row.written - (before.written if before else 0)
        if seq:
            review.reads.append(f"{row.name} by {seq} sequential scan(s), {seq_rows:,} rows")
        if index:
            review.reads.append(f"{row.name} by {index} index scan(s)")
        if written:
            review.writes.append(f"{written:,} rows of {row.name}")
    if review.blocks and not (review.rewrites or review.reads or review.writes):
        review.notes.append("catalog only: no row read or rewritten under the lock")
    code = "\n".join(ln for ln in statement.splitlines() if not ln.strip().startswith("--"))
    built = _ON_TABLE.search(code) if _PLAIN_INDEX.search(code) else None
    if built and built.group(1) in existing:
        name = built.group(1)
        review.notes.append(
            f"builds an index on {name} without CONCURRENTLY: it reads all "
            f"{existing[name].tuples:,} rows while writes to {name} wait"
        )
    return review


def _rank(mode: str) -> int:
    order = (
        "AccessShareLock",
        "RowShareLock",
        "RowExclusiveLock",
        "ShareUpdateExclusiveLock",
        "ShareLock",
        "ShareRowExclusiveLock",
        "ExclusiveLock",
        "AccessExclusiveLock",
    )
    return order.index(mode) if mode in order else -1


def _concurrent(
    conn: psycopg.Connection[Any], statement: str, existing: dict[str, Any]
) -> StatementReview:
    """A CONCURRENTLY statement: run in autocommit, its lock as documented."""
    started = time.perf_counter()
    conn.execute(statement.encode())
    review = StatementReview(_first_line(statement), seconds=time.perf_counter() - started)
    code = "\n".join(ln for ln in statement.splitlines() if not ln.strip().startswith("--"))
    creating = re.search(r"\bCREATE\s+(?:UNIQUE\s+)?INDEX\b", code, re.I)
    table = _ON_TABLE.search(code) if creating else None
    index = _INDEX_NAME.search(code)
    if table:
        name = table.group(1)
        rows = existing[name].tuples if name in existing else 0
        review.locks.append(
            f"SHARE UPDATE EXCLUSIVE on {name} (CONCURRENTLY: blocks neither reads nor writes)"
        )
        review.reads.append(f"{name} whole, twice, {rows:,} rows (while writes go on)")
    elif index:
        name = index.group(1)
        present = name in existing
        review.locks.append(
            f"SHARE UPDATE EXCLUSIVE on the table of {name} "
            "(CONCURRENTLY: blocks neither reads nor writes)"
        )
        if present:
            review.writes.append(f"drops {name}")
    return review
