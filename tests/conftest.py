"""Shared fixtures: a real PostgreSQL per session and a fresh database per test.

The server, the migrated template and the per-test clones come from jobrun's
own pytest plugin (:mod:`jobrun.testing.pytest_plugin`, loaded through its
``pytest11`` entry point, as it is for users): ``JOBRUN_TEST_DATABASE_URL``
(its user needs CREATE DATABASE rights), otherwise an embedded pgserver
started once per session in a temporary directory and deleted at the end.
Each test that asks for ``db_url`` gets its own clone of the template
(``CREATE DATABASE ... TEMPLATE``, tens of milliseconds), dropped afterwards.

Fixtures other tests rely on (names are a contract):

- ``pg_admin_url``: the maintenance database of the server (create/drop databases).
- ``empty_db_url``: a fresh database with nothing in it.
- ``db_url``: a fresh database with jobrun's schema migrated.
- ``pool``: an open jobrun pool (``open_pool``) on ``db_url``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from jobrun.postgres import Pool, open_pool
from jobrun.testing.databases import create_database, database_url, drop_database

# pytester runs the test kit's plugin on small test files (tests/integration/test_testing_kit.py).
pytest_plugins = ["pytester"]

__all__ = ["create_database", "database_url", "drop_database"]


@pytest.fixture(scope="session")
def _template_db(jobrun_template_database: str) -> str:
    return jobrun_template_database


@pytest.fixture
def pg_admin_url(jobrun_server_url: str) -> str:
    """The server's maintenance database URL (CREATE/DROP DATABASE allowed)."""
    return jobrun_server_url


@pytest.fixture
def empty_db_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty database, dropped after the test."""
    name, url = create_database(pg_admin_url)
    try:
        yield url
    finally:
        drop_database(pg_admin_url, name)


@pytest.fixture
def db_url(jobrun_database_url: str) -> str:
    """A fresh database with jobrun's schema, cloned from the migrated template."""
    return jobrun_database_url


@pytest.fixture
async def pool(db_url: str) -> AsyncIterator[Pool]:
    """An open jobrun pool on ``db_url``, closed after the test."""
    opened = await open_pool(db_url, worker_concurrency=2)
    try:
        yield opened
    finally:
        await opened.close()
