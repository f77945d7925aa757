"""Running a Django project's jobs in its tests, on the test database.

::

    from jobrun.integrations.django.testing import JobrunTestCase, run_jobs

    class SignupTests(JobrunTestCase):     # jobrun's tables in the test database
        def test_signup_sends_the_welcome(self):
            self.client.post("/signup", {...})
            assert run_jobs().jobs == 1    # every due job, run as a worker runs it

:class:`JobrunTestCase` is a ``TransactionTestCase``: jobs enqueued inside
``TestCase``'s never-committed transaction are invisible to the worker's
connections, exactly as they would be in production. With pytest-django,
use ``django_db(transaction=True)`` (or the ``transactional_db`` fixture)
and run the test inside :func:`migrated`, which migrates first and closes
the process's client last (Django cannot drop the test database while the
client's pool holds a connection to it). The
helpers work on whatever database Django's ``default`` connection names,
which during tests is the test database. jobrun's tables are not Django's,
so Django's flush between tests leaves their rows alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.test import TransactionTestCase

from jobrun.client import Client
from jobrun.integrations.django import close_client, config, registry
from jobrun.worker import CompletionStats

__all__ = ["JobrunTestCase", "migrate", "migrated", "run_jobs"]


def migrate() -> list[int]:
    """Apply jobrun's migrations to Django's current database; the versions it applied.

    Also closes the process's :func:`~jobrun.integrations.django.client`, so the
    next one opens on this database.
    """
    close_client()

    async def run() -> list[int]:
        async with Client(registry, config()) as client:
            return await client.migrate()

    return asyncio.run(run())


@contextmanager
def migrated() -> Iterator[list[int]]:
    """jobrun's tables in Django's current database for the block; the client closed after.

    For pytest-django, in a fixture over ``transactional_db``::

        @pytest.fixture
        def jobrun_tables(transactional_db):
            with migrated():
                yield

    Yields the versions :func:`migrate` applied.
    """
    applied = migrate()
    try:
        yield applied
    finally:
        close_client()


def run_jobs(**settings: Any) -> CompletionStats:
    """Run every due job of the project's registry, as a worker would, until none is left.

    ``settings`` override the project's (``queues=["mail"]``, ...). Returns
    the worker's counts (``.jobs``, and ``.endings`` by outcome).
    """

    async def run() -> CompletionStats:
        async with Client(registry, config(), **settings) as client:
            return await client.run_worker(drain=True)

    return asyncio.run(run())


class JobrunTestCase(TransactionTestCase):
    """A ``TransactionTestCase`` with jobrun's tables migrated before each test and the
    process's client closed after it."""

    def setUp(self) -> None:
        """Migrate jobrun's tables into the test database (a no-op once they are there)."""
        super().setUp()
        migrate()

    def tearDown(self) -> None:
        """Close the process's client, so Django can drop the test database at the end."""
        close_client()
        super().tearDown()
