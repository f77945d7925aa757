"""Shared fixtures: a real PostgreSQL per session and a fresh database per test.

The server is the one named by ``JOBRUN_TEST_DATABASE_URL`` (its user needs
CREATE DATABASE rights), otherwise an embedded pgserver started once per session
in a temporary directory and deleted at the end. The schema is migrated once into
a template database; each test that asks for ``db_url`` gets its own clone
(``CREATE DATABASE ... TEMPLATE``, tens of milliseconds), dropped afterwards.

Fixtures other tests rely on (names are a contract):

- ``pg_admin_url``: the maintenance database of the server (create/drop databases).
- ``empty_db_url``: a fresh database with nothing in it.
- ``db_url``: a fresh database with jobrun's schema migrated.
- ``pool``: an open jobrun pool (``open_pool``) on ``db_url``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from jobrun.postgres import Pool, migrate, open_pool


def database_url(server_url: str, dbname: str) -> str:
    """The URL of database ``dbname`` on the server of ``server_url``."""
    return make_conninfo(server_url, dbname=dbname)


def create_database(admin_url: str, *, template: str | None = None) -> tuple[str, str]:
    """Create a uniquely named database (optionally cloned); return (name, url)."""
    name = f"jobrun_test_{uuid.uuid4().hex[:12]}"
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(statement)
    return name, database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop ``name``, disconnecting whatever still uses it."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def _server_url() -> Iterator[str]:
    configured = os.environ.get("JOBRUN_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    import pgserver

    data_dir = Path(tempfile.mkdtemp(prefix="jobrun-test-pg-"))
    server = pgserver.get_server(data_dir, cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def _template_db(_server_url: str) -> Iterator[str]:
    name, url = create_database(_server_url)

    async def migrate_template() -> None:
        pool = await open_pool(url, worker_concurrency=1)
        try:
            await migrate(pool)
        finally:
            await pool.close()

    try:
        # A private loop: this sync session fixture must not depend on pytest-asyncio's.
        asyncio.run(migrate_template())
        yield name
    finally:
        drop_database(_server_url, name)


@pytest.fixture
def pg_admin_url(_server_url: str) -> str:
    """The server's maintenance database URL (CREATE/DROP DATABASE allowed)."""
    return _server_url


@pytest.fixture
def empty_db_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty database, dropped after the test."""
    name, url = create_database(pg_admin_url)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture
def db_url(pg_admin_url: str, _template_db: str) -> Iterator[str]:
    """A fresh database with jobrun's schema, cloned from the migrated template."""
    name, url = create_database(pg_admin_url, template=_template_db)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[Pool]:
    """An open jobrun pool on ``db_url``, closed after the test."""
    opened = await open_pool(db_url, worker_concurrency=2)
    try:
        yield opened
    finally:
        await opened.close()
