"""A pytest plugin giving each test its own real, migrated jobrun database.

Registered under the ``pytest11`` entry point ``jobrun``, so pytest loads it
in any environment where jobrun is installed (``-p no:jobrun`` turns it off;
with plugin autoloading disabled, ``-p jobrun`` turns it on). It only defines
fixtures, all named ``jobrun_*``; none does anything until a test asks for it.

The server is ``$JOBRUN_TEST_DATABASE_URL`` when set (its user needs CREATE
DATABASE), otherwise an embedded PostgreSQL (the ``jobrun[embedded]`` extra)
started in a temporary directory once per session and deleted at its end.
jobrun's schema is migrated once per session into a template database; each
test that asks for a database gets a fresh ``CREATE DATABASE ... TEMPLATE``
clone, dropped after the test.

Fixtures:

- ``jobrun_server_url`` (session): the server's URL, for CREATE/DROP DATABASE.
- ``jobrun_template_database`` (session): the migrated template's name.
- ``jobrun_database_url``: a fresh migrated database.
- ``jobrun_sync_producer``: a :class:`~jobrun.postgres.SyncProducer` on it.
- ``jobrun_pool`` and ``jobrun_store`` (async; defined only when pytest-asyncio
  is installed): an open
  pool (:func:`~jobrun.postgres.open_pool`) and a
  :class:`~jobrun.postgres.Store` on it. They follow pytest-asyncio's
  ``asyncio_default_fixture_loop_scope``, which must match the tests' loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from importlib.util import find_spec
from typing import TYPE_CHECKING

import pytest

from jobrun.errors import ConfigurationError

if TYPE_CHECKING:
    from jobrun.postgres import Pool, Store, SyncProducer

# Imports of jobrun.postgres happen inside the fixtures: pytest loads this
# plugin in every session of every project that has jobrun installed, and
# those that never ask for a database should not pay for psycopg's import.


@pytest.fixture(scope="session")
def jobrun_server_url() -> Iterator[str]:
    """The URL of the server test databases are created on (session-wide)."""
    from jobrun.testing.databases import server_for_tests

    with ExitStack() as stack:
        try:
            url = stack.enter_context(server_for_tests())
        except ConfigurationError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield url


@pytest.fixture(scope="session")
def jobrun_template_database(jobrun_server_url: str) -> Iterator[str]:
    """The name of a database with jobrun's schema migrated, cloned for each test."""
    from jobrun.testing.databases import create_migrated_template, drop_database

    name = create_migrated_template(jobrun_server_url)
    try:
        yield name
    finally:
        drop_database(jobrun_server_url, name)


@pytest.fixture
def jobrun_database_url(jobrun_server_url: str, jobrun_template_database: str) -> Iterator[str]:
    """The URL of a fresh database with jobrun's schema, dropped after the test."""
    from jobrun.testing.databases import create_database, drop_database

    name, url = create_database(jobrun_server_url, template=jobrun_template_database)
    try:
        yield url
    finally:
        drop_database(jobrun_server_url, name)


@pytest.fixture
def jobrun_sync_producer(jobrun_database_url: str) -> Iterator[SyncProducer]:
    """A :class:`~jobrun.postgres.SyncProducer` on ``jobrun_database_url``, closed after."""
    from jobrun.postgres import SyncProducer

    with SyncProducer(jobrun_database_url) as producer:
        yield producer


if find_spec("pytest_asyncio") is not None:
    import pytest_asyncio

    @pytest_asyncio.fixture
    async def jobrun_pool(jobrun_database_url: str) -> AsyncIterator[Pool]:
        """An open pool (``open_pool``) on ``jobrun_database_url``, closed after the test."""
        from jobrun.postgres import open_pool

        pool = await open_pool(jobrun_database_url, worker_concurrency=2)
        try:
            yield pool
        finally:
            await pool.close()

    @pytest_asyncio.fixture
    async def jobrun_store(jobrun_pool: Pool) -> Store:
        """A :class:`~jobrun.postgres.Store` on ``jobrun_pool``."""
        from jobrun.postgres import Store

        return Store(jobrun_pool)
