"""The queries the plan report covers, read from their ``.sql`` files.

A query set is one sqlc ``queries:`` directory with its generated package:
jobrun's own (``db/query``, ``jobrun.sqlc``) and the detector's
(``examples/detector/db/query``, ``detector.sqlc``), whose plans are written
beside their queries (``db/plans``, ``examples/detector/db/plans``). For each
query the file gives its name, its command and its leading comment, and in
that comment its plan rules: lines ``-- plan: <clauses>`` (every case) or
``-- plan(<case>, ...): <clauses>`` (the named cases only); see
:mod:`jobrun_tools.plans.rules`. The statement itself is the generated
constant, the very text the store sends.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

__all__ = ["QUERY_SETS", "Query", "QuerySet", "RuleLine", "load_queries"]

ROOT = Path(__file__).resolve().parents[2]

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s+:(\w+)")
_RULE = re.compile(r"^--\s*plan(?:\(([^)]*)\))?:\s*(.*?)\s*$")


@dataclass(frozen=True, slots=True)
class QuerySet:
    """One directory of annotated queries, its generated package and its plans folder."""

    name: str
    queries: Path
    package: str
    plans: Path


QUERY_SETS = (
    QuerySet("jobrun", ROOT / "db" / "query", "jobrun.sqlc", ROOT / "db" / "plans"),
    QuerySet(
        "detector",
        ROOT / "examples" / "detector" / "db" / "query",
        "detector.sqlc",
        ROOT / "examples" / "detector" / "db" / "plans",
    ),
)
"""Every query set the report covers, jobrun's first."""


@dataclass(frozen=True, slots=True)
class RuleLine:
    """One ``-- plan`` line of a query's leading comment."""

    cases: tuple[str, ...] | None
    """The cases it binds, or None for every case of the query."""
    text: str
    """The clauses as written, separated by semicolons."""
    where: str
    """``file:line`` of the comment line, for messages."""


@dataclass(frozen=True, slots=True)
class Query:
    """One annotated query of a query set."""

    query_set: QuerySet
    file: str
    """The query file's name without ``.sql`` (``jobs``); the generated module's name."""
    name: str
    command: str
    rules: tuple[RuleLine, ...]

    @property
    def source(self) -> str:
        """The query file, relative to the repository (``db/query/jobs.sql``)."""
        return str((self.query_set.queries / f"{self.file}.sql").relative_to(ROOT))

    @property
    def module(self) -> ModuleType:
        """The generated module of the query's file."""
        return importlib.import_module(f"{self.query_set.package}.{self.file}")

    @property
    def statement(self) -> str:
        """The generated SQL constant: the text the store sends."""
        constant = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", self.name).upper()
        text = getattr(self.module, constant)
        assert isinstance(text, str), constant
        return text

    @property
    def plan_file(self) -> Path:
        """Where the query's plans are written: ``<plans>/<file>/<Name>.txt``."""
        return self.query_set.plans / self.file / f"{self.name}.txt"


def load_queries(query_set: QuerySet) -> list[Query]:
    """Every query of ``query_set``'s files, in file order, with its ``-- plan`` lines."""
    found: list[Query] = []
    for path in sorted(query_set.queries.glob("*.sql")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            named = _NAME.match(line)
            if not named:
                continue
            rules: list[RuleLine] = []
            for offset, comment in enumerate(lines[index + 1 :], start=index + 2):
                if not comment.startswith("--"):
                    break
                rule = _RULE.match(comment)
                if rule:
                    cases = None
                    if rule.group(1) is not None:
                        cases = tuple(c.strip() for c in rule.group(1).split(",") if c.strip())
                    where = f"{path.relative_to(ROOT)}:{offset}"
                    rules.append(RuleLine(cases, rule.group(2), where))
            found.append(Query(query_set, path.stem, named.group(1), named.group(2), tuple(rules)))
    return found
