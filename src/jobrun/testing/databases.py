"""Throwaway databases for tests: a server, a migrated template, clones of it.

The database half of the test kit (:mod:`jobrun.testing.pytest_plugin`, and
jobrun's own ``tests/conftest.py``). It belongs to the test kit, not to the
adapter: nothing at run time creates databases. Creating and dropping them are
statements on a psycopg connection, so the import contract that keeps psycopg
inside :mod:`jobrun.postgres` names this module as its one other user.

The pattern: migrate jobrun's schema once into a template database, then give
each test its own ``CREATE DATABASE ... TEMPLATE`` clone (a file copy on the
server, tens of milliseconds), dropped afterwards. Tests are isolated without
truncating tables or rolling back transactions the code under test may want to
commit.

``CREATE DATABASE`` and ``DROP DATABASE`` take an identifier, which no query
parameter can carry, so they are composed here with :mod:`psycopg.sql`
(quoted identifiers, never string formatting) instead of living in
``db/query``: the one place in jobrun where a statement is written in Python,
and it is DDL on throwaway databases only.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from jobrun.postgres.embedded import start_embedded_server
from jobrun.postgres.migrate import migrate
from jobrun.postgres.pool import open_pool, unavailable_error

__all__ = [
    "TEST_DATABASE_URL_ENV",
    "create_database",
    "create_migrated_template",
    "database_url",
    "drop_database",
    "server_for_tests",
]

TEST_DATABASE_URL_ENV = "JOBRUN_TEST_DATABASE_URL"
"""The environment variable naming the server tests run on (its user may CREATE DATABASE)."""

DEFAULT_PREFIX = "jobrun_test_"
"""The name prefix of databases created here, so leftovers are easy to find."""


def database_url(server_url: str, dbname: str) -> str:
    """The URL of database ``dbname`` on the server of ``server_url``."""
    return make_conninfo(server_url, dbname=dbname)


def _admin(admin_url: str, statement: sql.Composed) -> None:
    try:
        conn = psycopg.connect(admin_url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise unavailable_error(admin_url, str(exc)) from None
    with conn:
        conn.execute(statement)


def create_database(
    admin_url: str, *, template: str | None = None, prefix: str = DEFAULT_PREFIX
) -> tuple[str, str]:
    """Create a uniquely named database, a clone of ``template`` if given; return (name, url).

    ``admin_url`` is any database of the server (its user needs CREATE
    DATABASE). Cloning needs the template to have no other session open.
    """
    name = f"{prefix}{uuid.uuid4().hex[:12]}"
    if template is None:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    else:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    _admin(admin_url, statement)
    return name, database_url(admin_url, name)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name`` if it exists, disconnecting whatever still uses it."""
    _admin(
        admin_url,
        sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)),
    )


def create_migrated_template(admin_url: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """Create a database with jobrun's schema migrated into it, to clone; return its name.

    Runs the migrations on a private event loop, so call it where no loop is
    running (a session fixture's setup). The caller drops it when done.
    """
    name, url = create_database(admin_url, prefix=prefix)

    async def run() -> None:
        pool = await open_pool(url, worker_concurrency=1)
        try:
            await migrate(pool)
        finally:
            await pool.close()

    try:
        asyncio.run(run())
    except BaseException:
        drop_database(admin_url, name)
        raise
    return name


@contextmanager
def server_for_tests() -> Iterator[str]:
    """The URL of a server to create test databases on, for the length of the block.

    ``$JOBRUN_TEST_DATABASE_URL`` when set (used as is, never stopped);
    otherwise a fresh embedded server (the ``jobrun[embedded]`` extra) in a
    temporary directory, stopped and deleted at the end of the block.
    Raises ConfigurationError when neither is available.
    """
    configured = os.environ.get(TEST_DATABASE_URL_ENV)
    if configured:
        yield configured
        return
    data_dir = Path(tempfile.mkdtemp(prefix="jobrun-test-pg-"))
    try:
        server = start_embedded_server(
            data_dir,
            cleanup_mode="delete",
            missing=f"no test database server: set {TEST_DATABASE_URL_ENV} to a URL whose user "
            "may CREATE DATABASE, or pip install 'jobrun[embedded]'",
        )
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
