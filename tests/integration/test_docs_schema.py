"""The schema reference page names every table and column a migrated database has."""

from __future__ import annotations

from pathlib import Path

import psycopg

SCHEMA_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "schema.md"


def test_every_table_and_column_is_on_the_schema_page(db_url: str) -> None:
    page = SCHEMA_PAGE.read_text()
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY table_name, ordinal_position"
        ).fetchall()
    tables = {table for table, _ in rows}
    assert {"jobs", "job_events", "processed_effects", "queues", "schedules"} <= tables
    for table in tables:
        assert f"## `{table}`" in page, f"table {table} is not on the schema page"
    section = dict.fromkeys(tables, "")
    for table in tables:
        start = page.index(f"## `{table}`")
        end = page.find("\n## ", start + 1)
        section[table] = page[start : end if end != -1 else len(page)]
    for table, column in rows:
        assert f"`{column}`" in section[table], f"{table}.{column} is not on the schema page"
