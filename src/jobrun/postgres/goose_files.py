"""goose's migration files: their names, their annotations, and the statements they hold.

A migration is a plain SQL file named ``NNNNN_description.sql`` with goose's
annotations (``-- +goose Up``, ``Down``, ``StatementBegin``/``StatementEnd``,
``NO TRANSACTION``). This module reads them; :mod:`jobrun.postgres.migrate`
applies them. Reading them takes a lexer of SQL's strings, quoted names,
dollar quotes and comments, so that a statement splits only on a top-level
semicolon and an annotation counts only outside them. goose itself is a Go
program; reading its format here keeps an installed jobrun able to migrate
with nothing but Python.
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

from jobrun.errors import MigrationError

__all__ = [
    "Migration",
    "default_migrations_source",
    "load_migrations",
    "migration_versions",
    "parse_migration",
]

_FILE_NAME = re.compile(r"^(?P<version>[0-9]+)_(?P<name>[A-Za-z0-9_.\-]+)\.sql$")
_ANNOTATION = re.compile(r"^--\s*\+goose\s+(?P<command>.*?)\s*$", re.IGNORECASE)
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][A-Za-z0-9_\x80-\uffff]*)?\$")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_$\x80-\uffff]")


@dataclass(frozen=True, slots=True)
class Migration:
    """One parsed migration file: its version, statements and transaction mode."""

    version: int
    file_name: str
    up: tuple[str, ...]
    down: tuple[str, ...]
    use_transaction: bool = True


class _Lexer:
    """Tracks where a SQL text is (code, string, quoted name, dollar quote, comment).

    Fed line by line, so annotations are recognised only at the start of a line
    that begins in plain code, and statements split only on top-level semicolons.
    """

    def __init__(self) -> None:
        self.state = "code"  # code | quote | equote | ident | dollar | block
        self.dollar_tag = ""
        self.block_depth = 0

    def scan(self, line: str, *, split: bool) -> tuple[list[tuple[str, bool]], str, bool]:
        """Scan one line; return (finished statements with has-code flags, rest, rest has code).

        With ``split`` False no statement ends on this line (inside StatementBegin/End).
        """
        finished: list[tuple[str, bool]] = []
        start = 0
        has_code = False
        i = 0
        n = len(line)
        while i < n:
            c = line[i]
            if self.state == "code":
                if line.startswith("--", i):
                    break
                if line.startswith("/*", i):
                    self.state, self.block_depth = "block", 1
                    i += 2
                    continue
                if c == "'":
                    prefix_e = (
                        i > 0
                        and line[i - 1] in "eE"
                        and (i < 2 or not _IDENT_CHAR.match(line[i - 2]))
                    )
                    self.state = "equote" if prefix_e else "quote"
                    has_code = True
                elif c == '"':
                    self.state = "ident"
                    has_code = True
                elif c == "$" and (i == 0 or not _IDENT_CHAR.match(line[i - 1])):
                    m = _DOLLAR_TAG.match(line, i)
                    if m:
                        self.state, self.dollar_tag = "dollar", m.group(0)
                        has_code = True
                        i = m.end()
                        continue
                    has_code = True
                elif c == ";" and split:
                    finished.append((line[start : i + 1], has_code))
                    start, has_code = i + 1, False
                elif not c.isspace():
                    has_code = True
                i += 1
            elif self.state in ("quote", "equote"):
                if c == "\\" and self.state == "equote":
                    i += 2
                    continue
                if c == "'":
                    if line.startswith("''", i):
                        i += 2
                        continue
                    self.state = "code"
                i += 1
            elif self.state == "ident":
                if c == '"':
                    if line.startswith('""', i):
                        i += 2
                        continue
                    self.state = "code"
                i += 1
            elif self.state == "dollar":
                if line.startswith(self.dollar_tag, i):
                    self.state = "code"
                    i += len(self.dollar_tag)
                    continue
                i += 1
            else:  # block comment, nestable in PostgreSQL
                if line.startswith("/*", i):
                    self.block_depth += 1
                    i += 2
                    continue
                if line.startswith("*/", i):
                    self.block_depth -= 1
                    if self.block_depth == 0:
                        self.state = "code"
                    i += 2
                    continue
                i += 1
        return finished, line[start:], has_code


def parse_migration(file_name: str, text: str) -> Migration:
    """Parse one goose SQL migration; raise MigrationError naming the file when malformed.

    Supported annotations: ``Up``, ``Down``, ``StatementBegin`` / ``StatementEnd``
    (everything between them is one statement) and ``NO TRANSACTION``.
    """
    return _MigrationParser(file_name).parse(_version_of(file_name), text)


def _version_of(file_name: str) -> int:
    m = _FILE_NAME.match(file_name)
    if not m:
        raise MigrationError(
            f"{file_name}: a migration file name must look like 00001_description.sql"
        )
    version = int(m.group("version"))
    if version < 1:
        raise MigrationError(f"{file_name}: migration versions start at 1")
    return version


_UNCLOSED = {
    "quote": "a string",
    "equote": "a string",
    "ident": "a quoted identifier",
    "block": "a /* comment",
}


class _MigrationParser:
    """One file's walk: the section it is in, the statement being gathered, the lexer."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.sections: dict[str, list[str]] = {"up": [], "down": []}
        self.section: str | None = None
        self.seen: set[str] = set()
        self.use_transaction = True
        self.lexer = _Lexer()
        self.in_block = False
        self.block_start = 0
        self.buffer: list[str] = []
        self.buffer_has_code = False

    def fail(self, lineno: int, why: str) -> MigrationError:
        return MigrationError(f"{self.file_name}:{lineno}: {why}")

    def parse(self, version: int, text: str) -> Migration:
        lines = text.splitlines()
        for lineno, line in enumerate(lines, start=1):
            annotation = _ANNOTATION.match(line.strip()) if self.lexer.state == "code" else None
            if annotation:
                self.annotate(lineno, annotation.group("command"))
            else:
                self.add_line(lineno, line)
        last = len(lines)
        if self.lexer.state != "code":
            what = _UNCLOSED.get(self.lexer.state) or f"a {self.lexer.dollar_tag} quoted body"
            raise self.fail(last, f"the file ends inside {what}")
        if "up" not in self.seen:
            raise MigrationError(f"{self.file_name}: no '-- +goose Up' annotation")
        self.close_section(last)
        return Migration(
            version=version,
            file_name=self.file_name,
            up=tuple(self.sections["up"]),
            down=tuple(self.sections["down"]),
            use_transaction=self.use_transaction,
        )

    def reset_buffer(self) -> None:
        self.buffer, self.buffer_has_code = [], False

    def close_section(self, lineno: int) -> None:
        if self.in_block:
            raise self.fail(self.block_start, "StatementBegin without a matching StatementEnd")
        if self.buffer_has_code:
            raise self.fail(lineno, "the last statement of the section does not end with ';'")
        self.reset_buffer()

    def annotate(self, lineno: int, written: str) -> None:
        command = " ".join(written.split()).lower()
        if command in ("up", "down"):
            self.open_section(lineno, command)
        elif command == "statementbegin":
            if self.section is None:
                raise self.fail(lineno, "StatementBegin before '-- +goose Up'")
            if self.in_block:
                raise self.fail(lineno, "StatementBegin inside another StatementBegin")
            if self.buffer_has_code:
                raise self.fail(lineno, "the statement before StatementBegin does not end with ';'")
            self.in_block, self.block_start = True, lineno
            self.reset_buffer()
        elif command == "statementend":
            if not self.in_block or self.section is None:
                raise self.fail(lineno, "StatementEnd without StatementBegin")
            if self.buffer_has_code:
                self.sections[self.section].append("\n".join(self.buffer).strip())
            self.in_block = False
            self.reset_buffer()
        elif command == "no transaction":
            self.use_transaction = False
        else:
            raise self.fail(lineno, f"unknown annotation '-- +goose {written}'")

    def open_section(self, lineno: int, command: str) -> None:
        if command in self.seen:
            raise self.fail(lineno, f"more than one '-- +goose {command.title()}'")
        if command == "up" and "down" in self.seen:
            raise self.fail(lineno, "'-- +goose Up' must come before '-- +goose Down'")
        if self.section is not None:
            self.close_section(lineno)
        self.section = command
        self.seen.add(command)

    def add_line(self, lineno: int, line: str) -> None:
        finished, rest, rest_has_code = self.lexer.scan(line, split=not self.in_block)
        if self.section is None:
            if finished or rest_has_code:
                raise self.fail(lineno, "SQL before '-- +goose Up'")
            return
        for part, part_has_code in finished:
            self.buffer.append(part)
            if self.buffer_has_code or part_has_code:
                self.sections[self.section].append("\n".join(self.buffer).strip())
            self.reset_buffer()
        if finished and not rest_has_code:
            rest = ""  # a comment trailing a statement on its line belongs to that statement
        if rest.strip() or self.buffer:
            self.buffer.append(rest)
        self.buffer_has_code = self.buffer_has_code or rest_has_code


def default_migrations_source() -> Traversable:
    """The migrations shipped with jobrun: inside the wheel, else the source tree's.

    A wheel carries them as ``jobrun/migrations`` (pyproject force-includes them);
    an editable install runs from ``src/jobrun``, next to the repository's
    ``migrations/`` directory.
    """
    packaged = importlib.resources.files("jobrun") / "migrations"
    if packaged.is_dir():
        return packaged
    repository = Path(__file__).resolve().parents[3] / "migrations"
    if repository.is_dir():
        return repository
    raise MigrationError("jobrun's migrations are missing from this installation")


def load_migrations(source: Traversable | Path | None = None) -> list[Migration]:
    """Parse every ``*.sql`` file of ``source`` (default: jobrun's own), by version."""
    root = default_migrations_source() if source is None else source
    migrations: dict[int, Migration] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql") or not entry.is_file():
            continue
        migration = parse_migration(entry.name, entry.read_text(encoding="utf-8"))
        if migration.version in migrations:
            other = migrations[migration.version].file_name
            raise MigrationError(
                f"{entry.name}: version {migration.version} is also used by {other}"
            )
        migrations[migration.version] = migration
    return [migrations[v] for v in sorted(migrations)]


def migration_versions(source: Traversable | Path | None = None) -> list[int]:
    """The versions of the ``*.sql`` migrations in ``source`` (default: jobrun's own), read
    from their file names alone.

    What :func:`~jobrun.postgres.migrate.check_schema` compares with the
    database. Reading the names costs microseconds; parsing every file
    (:func:`load_migrations`) costs milliseconds, which each readiness probe
    would take from a running worker's event loop. A badly named file raises
    MigrationError here too.
    """
    root = default_migrations_source() if source is None else source
    return sorted(
        {
            _version_of(entry.name)
            for entry in root.iterdir()
            if entry.name.endswith(".sql") and entry.is_file()
        }
    )
