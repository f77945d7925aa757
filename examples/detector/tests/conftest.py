"""Fixtures of the detector's tests: a real PostgreSQL, a fresh migrated database per test.

Like jobrun's own suite, the server is ``JOBRUN_TEST_DATABASE_URL`` when set,
otherwise an embedded pgserver for the session. A template database gets
jobrun's and the detector's migrations once; each test clones it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from detector.postgres import migrate_detector
from jobrun.postgres import open_pool


def _create(admin_url: str, template: str | None = None) -> tuple[str, str]:
    name = f"detector_test_{uuid.uuid4().hex[:12]}"
    stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        stmt = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(stmt)
    return name, make_conninfo(admin_url, dbname=name)


def _drop(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(scope="session")
def detector_server_url() -> Iterator[str]:
    configured = os.environ.get("JOBRUN_TEST_DATABASE_URL")
    if configured:
        yield configured
        return
    import pgserver

    data_dir = Path(tempfile.mkdtemp(prefix="detector-test-pg-"))
    server = pgserver.get_server(data_dir, cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def detector_template(detector_server_url: str) -> Iterator[str]:
    name, url = _create(detector_server_url)

    async def run() -> None:
        pool = await open_pool(url, worker_concurrency=1)
        try:
            await migrate_detector(pool)
        finally:
            await pool.close()

    try:
        # A private loop in a thread: this sync fixture may be reached from a running loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, run()).result()
        yield name
    finally:
        _drop(detector_server_url, name)


@pytest.fixture
def detector_db(detector_server_url: str, detector_template: str) -> Iterator[str]:
    """A fresh database with jobrun's and the detector's schema."""
    name, url = _create(detector_server_url, detector_template)
    try:
        yield url
    finally:
        _drop(detector_server_url, name)


@pytest.fixture
def empty_pg(detector_server_url: str) -> Iterator[str]:
    """A fresh, empty database."""
    name, url = _create(detector_server_url)
    try:
        yield url
    finally:
        _drop(detector_server_url, name)


def missing_from_covering_snapshot(state: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Covered intents whose decision is absent from the bytes of the revision covering it.

    An intent marked covered by revision r is never delivered again, so r's
    bytes must hold its decision (unless it had expired when they were made).
    """
    missing = []
    for agent_id, revision, (site, address, rule_version, expires_ms) in state["coverage"]:
        body = json.loads(state["snapshot_bodies"][(agent_id, revision)])
        wanted = {
            "site": site,
            "address": address,
            "rule_version": rule_version,
            "expires_ms": expires_ms,
        }
        if expires_ms > body["generated_ms"] and wanted not in body["decisions"]:
            missing.append((agent_id, revision, site, address, rule_version))
    return missing


@pytest.fixture
def coverage_gaps() -> Callable[[dict[str, Any]], list[tuple[Any, ...]]]:
    """:func:`missing_from_covering_snapshot`, for tests (they cannot import conftest)."""
    return missing_from_covering_snapshot
