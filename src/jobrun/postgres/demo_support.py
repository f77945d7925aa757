"""Database fixtures of ``jobrun demo``, and nothing else.

The demo shows a handler's effect committing exactly once with its job: some
demo jobs return a commit callback that inserts one row into
``demo_effects(job_id uuid primary key)`` through the completion
transaction's connection. That table is a demo fixture, not part of jobrun's
schema, so it is created here (``CREATE TABLE IF NOT EXISTS``) instead of in a
migration, and its three statements live in this one module rather than in
``db/query``: the house rule "no SQL in hand-written Python" makes an
exception for fixture DDL, and this module is that exception, kept small and
out of the runtime. The demo also creates its own scratch database on the
embedded server (:func:`create_demo_database`).

Only :mod:`jobrun.demo` uses this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from jobrun.postgres.convert import map_error
from jobrun.postgres.pool import Pool, database_location

__all__ = [
    "count_demo_effects",
    "create_demo_database",
    "ensure_demo_effects_table",
    "insert_demo_effect",
]

_CREATE_TABLE = "CREATE TABLE IF NOT EXISTS demo_effects (job_id uuid PRIMARY KEY)"
_INSERT = "INSERT INTO demo_effects (job_id) VALUES (%(job_id)s)"
_COUNT = "SELECT count(*) FROM demo_effects WHERE job_id = ANY(%(ids)s)"


def create_demo_database(server_url: str, name: str) -> str:
    """Create database ``name`` on the server of ``server_url``; return its URL."""
    try:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise map_error(exc, database_location(server_url)) from exc
    return make_conninfo(server_url, dbname=name)


async def ensure_demo_effects_table(pool: Pool) -> None:
    """Create the ``demo_effects`` table when it does not exist yet."""
    async with pool.connection() as conn:
        await conn.execute(_CREATE_TABLE)


async def insert_demo_effect(conn: Any, job_id: UUID) -> None:
    """Write ``job_id``'s effect row on ``conn``: the completion transaction's connection."""
    if not isinstance(conn, psycopg.AsyncConnection):
        raise TypeError("a commit callback receives a psycopg.AsyncConnection")
    await conn.execute(_INSERT, {"job_id": job_id})


async def count_demo_effects(pool: Pool, job_ids: Sequence[UUID]) -> int:
    """How many of ``job_ids`` have an effect row."""
    async with pool.connection() as conn:
        cur = await conn.execute(_COUNT, {"ids": list(job_ids)})
        row = await cur.fetchone()
    return int(row[0]) if row is not None else 0
