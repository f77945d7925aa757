"""The demo's own database fixtures: its effect table, its queries, its scratch database.

The demo shows a handler's effect committing exactly once with its job: some
demo jobs return a commit callback that inserts one row into
``demo_effects(job_id uuid primary key)`` through the completion
transaction's connection. That table belongs to the demo, as a user's tables
belong to their service, not to jobrun's schema: its DDL is ``schema.sql``
beside this module (run here, read by sqlc), and its queries are generated
from ``queries.sql`` into :mod:`jobrun.demo.sqlc` (a second entry of
``sqlc.yaml``). :func:`create_demo_database` makes a scratch database on
the embedded server for the detector's demo (``jobrun demo`` itself runs in
the database every command uses, so ``jobrun web`` shows its jobs); CREATE
DATABASE takes an identifier, not a parameter, so that one statement is
composed with ``psycopg.sql``.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from jobrun.demo.sqlc import queries as demo_queries
from jobrun.postgres.errors_map import map_error
from jobrun.postgres.pool import Pool, database_location

__all__ = [
    "count_demo_effects",
    "create_demo_database",
    "ensure_demo_effects_table",
    "insert_demo_effect",
]


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
    ddl = (
        importlib.resources.files("jobrun.demo").joinpath("schema.sql").read_text(encoding="utf-8")
    )
    async with pool.connection() as conn:
        await conn.execute(ddl)


async def insert_demo_effect(conn: Any, job_id: UUID) -> None:
    """Write ``job_id``'s effect row on ``conn``: the completion transaction's connection."""
    if not isinstance(conn, psycopg.AsyncConnection):
        raise TypeError("a commit callback receives a psycopg.AsyncConnection")
    await demo_queries.AsyncQuerier(conn).demo_effect_insert(job_id=job_id)


async def count_demo_effects(pool: Pool, job_ids: Sequence[UUID]) -> int:
    """How many of ``job_ids`` have an effect row."""
    async with pool.connection() as conn:
        count = await demo_queries.AsyncQuerier(conn).demo_effect_count(job_ids=list(job_ids))
    return int(count or 0)
