"""The goose migration parser: sections, statement splitting, annotations, malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from jobrun.errors import MigrationError
from jobrun.postgres.goose_files import load_migrations, parse_migration


def test_up_and_down_sections_split_into_statements() -> None:
    m = parse_migration(
        "00003_things.sql",
        """-- a header comment before Up is fine
-- +goose Up
CREATE TABLE a (id int);
CREATE TABLE b (id int); CREATE TABLE c (id int);

-- +goose Down
DROP TABLE a;
""",
    )
    assert m.version == 3
    assert m.file_name == "00003_things.sql"
    assert m.use_transaction
    assert m.up == (
        "CREATE TABLE a (id int);",
        "CREATE TABLE b (id int);",
        "CREATE TABLE c (id int);",
    )
    assert m.down == ("DROP TABLE a;",)


def test_semicolons_inside_strings_identifiers_and_comments_do_not_split() -> None:
    m = parse_migration(
        "1_x.sql",
        """-- +goose Up
INSERT INTO t VALUES ('a;b', 'it''s; fine', E'esc\\'; still', "odd;name");
/* block; comment /* nested; */ still; */ SELECT 1;
SELECT 2; -- trailing; comment
SELECT 'multi
line; string';
""",
    )
    assert m.up == (
        "INSERT INTO t VALUES ('a;b', 'it''s; fine', E'esc\\'; still', \"odd;name\");",
        "/* block; comment /* nested; */ still; */ SELECT 1;",
        "SELECT 2;",
        "SELECT 'multi\nline; string';",
    )


def test_dollar_quoted_bodies_are_one_statement_without_statement_begin() -> None:
    m = parse_migration(
        "2_fn.sql",
        """-- +goose Up
CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $body$
BEGIN
    PERFORM 1;
    RETURN $$x;$$::text::int;
END;
$body$;
SELECT $1;
""",
    )
    assert len(m.up) == 2
    assert m.up[0].startswith("CREATE FUNCTION f()")
    assert m.up[0].endswith("$body$;")
    assert m.up[1] == "SELECT $1;"


def test_statement_begin_end_keeps_everything_as_one_statement() -> None:
    m = parse_migration(
        "00004_fn.sql",
        """-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION g() RETURNS void LANGUAGE sql AS '
    SELECT 1;
    SELECT 2;
';
-- +goose StatementEnd
SELECT 3;
-- +goose Down
-- +goose StatementBegin
DROP FUNCTION g();
-- +goose StatementEnd
""",
    )
    assert len(m.up) == 2
    assert "SELECT 1;\n    SELECT 2;" in m.up[0]
    assert m.up[1] == "SELECT 3;"
    assert m.down == ("DROP FUNCTION g();",)


def test_no_transaction_annotation() -> None:
    m = parse_migration(
        "00005_idx.sql",
        """-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY i ON t (x);
-- +goose Down
DROP INDEX CONCURRENTLY i;
""",
    )
    assert not m.use_transaction
    assert m.up == ("CREATE INDEX CONCURRENTLY i ON t (x);",)


def test_annotations_are_case_and_space_insensitive() -> None:
    m = parse_migration("6_a.sql", "--  +goose   up\nSELECT 1;\n-- +goose DOWN\n")
    assert m.up == ("SELECT 1;",)
    assert m.down == ()


def test_annotation_inside_a_dollar_quote_is_text() -> None:
    m = parse_migration(
        "7_a.sql",
        "-- +goose Up\nSELECT $$\n-- +goose Down\n$$;\n",
    )
    assert m.up == ("SELECT $$\n-- +goose Down\n$$;",)
    assert m.down == ()


@pytest.mark.parametrize(
    ("file_name", "text", "complaint"),
    [
        ("00001_x.sql", "CREATE TABLE t (id int);\n", "SQL before"),
        ("00001_x.sql", "-- only a comment\n", "no '-- +goose Up'"),
        ("00001_x.sql", "-- +goose Down\nDROP TABLE t;\n", "no '-- +goose Up'"),
        (
            "00001_x.sql",
            "-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n-- +goose Down\n",
            "StatementBegin without a matching StatementEnd",
        ),
        (
            "00001_x.sql",
            "-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n",
            "StatementBegin without a matching StatementEnd",
        ),
        ("00001_x.sql", "-- +goose Up\n-- +goose StatementEnd\n", "StatementEnd without"),
        ("00001_x.sql", "-- +goose Up\nSELECT 1\n", "does not end with ';'"),
        ("00001_x.sql", "-- +goose Up\nSELECT 'open;\n", "ends inside a string"),
        ("00001_x.sql", "-- +goose Up\nSELECT $q$ x;\n", "ends inside a $q$"),
        ("00001_x.sql", "-- +goose Up\n/* x;\n", "ends inside a /* comment"),
        ("00001_x.sql", "-- +goose Up\n-- +goose Up\n", "more than one"),
        ("00001_x.sql", "-- +goose Up\n-- +goose ENVSUB ON\n", "unknown annotation"),
        ("jobs.sql", "-- +goose Up\nSELECT 1;\n", "file name"),
        ("0001-jobs.sql", "-- +goose Up\nSELECT 1;\n", "file name"),
        ("00000_zero.sql", "-- +goose Up\nSELECT 1;\n", "start at 1"),
    ],
)
def test_malformed_files_raise_migration_error_naming_the_file(
    file_name: str, text: str, complaint: str
) -> None:
    with pytest.raises(MigrationError) as info:
        parse_migration(file_name, text)
    assert file_name in str(info.value)
    assert complaint in str(info.value)


def test_load_migrations_orders_by_version_and_ignores_other_files(tmp_path: Path) -> None:
    (tmp_path / "00010_b.sql").write_text("-- +goose Up\nSELECT 10;\n")
    (tmp_path / "00002_a.sql").write_text("-- +goose Up\nSELECT 2;\n")
    (tmp_path / "README.md").write_text("not a migration")
    assert [m.version for m in load_migrations(tmp_path)] == [2, 10]


def test_duplicate_versions_are_refused(tmp_path: Path) -> None:
    (tmp_path / "00002_a.sql").write_text("-- +goose Up\nSELECT 2;\n")
    (tmp_path / "2_b.sql").write_text("-- +goose Up\nSELECT 2;\n")
    with pytest.raises(MigrationError, match="also used by"):
        load_migrations(tmp_path)


def test_the_shipped_migrations_parse() -> None:
    migrations = load_migrations()
    assert migrations, "jobrun ships at least one migration"
    assert migrations[0].version == 1
    assert all(m.up for m in migrations)
