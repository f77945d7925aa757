"""The migration runner on a real server: schema, idempotency, concurrency, goose layout.

The catalog queries below read PostgreSQL's own tables to check what the
migrations built; they are test instrumentation, not application SQL.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobrun.errors import MigrationError
from jobrun.postgres import Pool, load_migrations, migrate, migration_status, open_pool


def catalog(url: str) -> dict[str, Any]:
    """Tables, indexes, constraints and goose rows: what a migration changes."""
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        indexes = [
            tuple(r)
            for r in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        constraints = [
            tuple(r)
            for r in conn.execute(
                "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid)"
                " FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
            )
        ]
        goose: list[tuple[Any, ...]] = []
        if "goose_db_version" in tables:
            goose = [
                tuple(r)
                for r in conn.execute(
                    "SELECT id, version_id, is_applied, tstamp FROM goose_db_version ORDER BY id"
                )
            ]
    return {"tables": tables, "indexes": indexes, "constraints": constraints, "goose": goose}


async def run_migrate(url: str, source: Path | None = None) -> list[int]:
    pool = await open_pool(url, worker_concurrency=1)
    try:
        return await migrate(pool, source=source)
    finally:
        await pool.close()


async def test_migrate_from_empty_builds_the_schema(empty_db_url: str) -> None:
    applied = await run_migrate(empty_db_url)

    assert applied == [m.version for m in load_migrations()]
    state = catalog(empty_db_url)
    assert {"jobs", "job_events", "processed_effects", "schedules", "goose_db_version"} <= set(
        state["tables"]
    )
    index_names = {name for name, _ in state["indexes"]}
    assert {"jobs_claim_idx", "jobs_leased_idx", "jobs_idem_uniq"} <= index_names
    claim_def = dict(state["indexes"])["jobs_claim_idx"]
    assert "WHERE (state = 'queued'::job_state)" in claim_def
    assert "UNIQUE" in dict(state["indexes"])["jobs_idem_uniq"]
    checks = {name for table, name, kind, _ in state["constraints"] if kind == "c"}
    assert {
        "jobs_lease_matches_state",
        "jobs_finished_matches_state",
        "jobs_queued_has_attempts",
        "jobs_attempts_valid",
        "schedules_one_trigger",
    } <= checks


async def test_second_run_applies_nothing_and_changes_nothing(empty_db_url: str) -> None:
    await run_migrate(empty_db_url)
    before = catalog(empty_db_url)

    assert await run_migrate(empty_db_url) == []
    assert catalog(empty_db_url) == before


async def test_version_table_has_gooses_layout_and_rows(empty_db_url: str) -> None:
    await run_migrate(empty_db_url)

    with psycopg.connect(empty_db_url) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type, is_nullable, column_default"
            " FROM information_schema.columns WHERE table_name = 'goose_db_version'"
            " ORDER BY ordinal_position"
        ).fetchall()
        primary_key = conn.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE conrelid = 'goose_db_version'::regclass AND contype = 'p'"
        ).fetchone()
    assert [(c[0], c[1], c[2]) for c in columns] == [
        ("id", "integer", "NO"),
        ("version_id", "bigint", "NO"),
        ("is_applied", "boolean", "NO"),
        ("tstamp", "timestamp without time zone", "YES"),
    ]
    assert str(columns[0][3]).startswith("nextval(")  # serial
    assert columns[3][3] == "now()"
    assert primary_key == ("PRIMARY KEY (id)",)
    rows = catalog(empty_db_url)["goose"]
    versions = [m.version for m in load_migrations()]
    assert [(r[1], r[2]) for r in rows] == [(0, True)] + [(v, True) for v in versions]


def test_concurrent_runners_in_separate_processes_record_each_version_once(
    empty_db_url: str,
) -> None:
    command = [sys.executable, "-m", "jobrun", "migrate", "--database-url", empty_db_url]
    runners = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [(p.wait(timeout=120), *p.communicate()) for p in runners]

    assert [rc for rc, _, _ in results] == [0] * 4, results
    assert sum("applied" in out for _, out, _ in results) == 1, results
    versions = [r[1] for r in catalog(empty_db_url)["goose"]]
    assert versions == [0] + [m.version for m in load_migrations()]


async def test_status_reports_pending_then_applied(empty_db_url: str) -> None:
    pool = await open_pool(empty_db_url, worker_concurrency=1)
    try:
        before = await migration_status(pool)
        assert before and not any(s.applied for s in before)
        assert catalog(empty_db_url)["tables"] == []  # status creates nothing
        await migrate(pool)
        after = await migration_status(pool)
    finally:
        await pool.close()
    assert [s.version for s in after] == [s.version for s in before]
    assert all(s.applied and s.applied_at is not None for s in after)
    assert after[0].file_name == load_migrations()[0].file_name


async def test_migrated_fixture_database_is_up_to_date(pool: Pool) -> None:
    assert await migrate(pool) == []


def write(directory: Path, name: str, text: str) -> None:
    (directory / name).write_text(text)


async def test_malformed_file_raises_naming_it_and_applies_nothing(
    empty_db_url: str, tmp_path: Path
) -> None:
    write(tmp_path, "00001_ok.sql", "-- +goose Up\nCREATE TABLE ok (id int);\n")
    write(tmp_path, "00002_broken.sql", "-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n")

    with pytest.raises(MigrationError, match=r"00002_broken\.sql"):
        await run_migrate(empty_db_url, tmp_path)
    assert "ok" not in catalog(empty_db_url)["tables"]


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("00001_no_up.sql", "-- +goose Down\nSELECT 1;\n"),
        ("first.sql", "-- +goose Up\nSELECT 1;\n"),
    ],
)
async def test_bad_file_raises_migration_error_naming_it(
    empty_db_url: str, tmp_path: Path, name: str, text: str
) -> None:
    write(tmp_path, name, text)
    with pytest.raises(MigrationError, match=name.replace(".", r"\.")):
        await run_migrate(empty_db_url, tmp_path)


async def test_failing_statement_rolls_back_its_file_and_names_it(
    empty_db_url: str, tmp_path: Path
) -> None:
    write(tmp_path, "00001_ok.sql", "-- +goose Up\nCREATE TABLE ok (id int);\n")
    write(
        tmp_path,
        "00002_fails.sql",
        "-- +goose Up\nCREATE TABLE half (id int);\nSELECT * FROM no_such_table;\n",
    )

    with pytest.raises(MigrationError, match=r"00002_fails\.sql.*no_such_table"):
        await run_migrate(empty_db_url, tmp_path)
    state = catalog(empty_db_url)
    assert "ok" in state["tables"]
    assert "half" not in state["tables"]
    assert [r[1] for r in state["goose"]] == [0, 1]

    write(tmp_path, "00002_fails.sql", "-- +goose Up\nCREATE TABLE half (id int);\n")
    assert await run_migrate(empty_db_url, tmp_path) == [2]


async def test_no_transaction_and_statement_blocks_run(empty_db_url: str, tmp_path: Path) -> None:
    write(
        tmp_path,
        "00001_table.sql",
        """-- +goose Up
CREATE TABLE t (x int, note text DEFAULT 'a;b');
-- +goose StatementBegin
CREATE FUNCTION t_count() RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT count(*) FROM t);
END;
$$;
-- +goose StatementEnd
-- +goose Down
DROP TABLE t;
""",
    )
    # CREATE INDEX CONCURRENTLY fails inside a transaction block: this proves the mode.
    write(
        tmp_path,
        "00002_index.sql",
        "-- +goose NO TRANSACTION\n-- +goose Up\nCREATE INDEX CONCURRENTLY t_x ON t (x);\n",
    )

    assert await run_migrate(empty_db_url, tmp_path) == [1, 2]
    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("SELECT t_count()").fetchone() == (0,)
    assert "t_x" in {name for name, _ in catalog(empty_db_url)["indexes"]}
