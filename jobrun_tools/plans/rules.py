"""Plan rules: what a query's plan must (not) do, declared beside the query.

A query's leading comment may hold lines ``-- plan: <clause>; <clause>`` that
bind every case of the query, or ``-- plan(<case>, ...): ...`` that bind the
named cases only. The clauses:

``index NAME``
    the plan reads index NAME.
``TABLE only by index NAME[, NAME]``
    every read of TABLE goes through one of these indexes (no other index, no
    sequential scan).
``no seq scan on TABLE[, TABLE]``
    no sequential scan of these tables.
``seq scan on TABLE: REASON``
    a sequential scan of TABLE is what the query must do, for the reason
    given; this waives the default rule for TABLE.
``no sort``
    no Sort or Incremental Sort node: the order comes from an index.
``buffers <= N``
    executed (EXPLAIN ANALYZE, BUFFERS, in a transaction that is rolled back),
    the statement touches at most N shared buffers.
``rows removed <= N``
    executed, its filters and join filters throw away at most N rows in all.

Every query is also held to the default rule: no sequential scan of
``jobs``, ``job_events`` or ``processed_effects`` (the tables that grow
with the traffic), unless a ``seq scan on`` clause says why.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jobrun_tools.plans.catalog import RuleLine
from jobrun_tools.plans.render import walk

__all__ = ["DEFAULT_TABLES", "Clause", "RuleError", "Violation", "check", "parse_rules"]

DEFAULT_TABLES = ("jobs", "job_events", "processed_effects")
"""The tables no plan may read whole unless its query says why."""

_SCANS = frozenset(
    {"Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Tid Scan", "Sample Scan"}
)
_NAMES = r"[A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_][\w]*)*"
_FORMS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("index", re.compile(r"^index\s+(\w+)$", re.I)),
    ("only", re.compile(rf"^(\w+)\s+only\s+by\s+index(?:es)?\s+({_NAMES})$", re.I)),
    ("no-seq", re.compile(rf"^no\s+seq\s+scan\s+on\s+({_NAMES})$", re.I)),
    ("seq-ok", re.compile(r"^seq\s+scan\s+on\s+(\w+)\s*:\s*(\S.*)$", re.I)),
    ("no-sort", re.compile(r"^no\s+sort$", re.I)),
    ("buffers", re.compile(r"^buffers\s*<=\s*(\d+)$", re.I)),
    ("removed", re.compile(r"^rows\s+removed\s*<=\s*(\d+)$", re.I)),
)


class RuleError(Exception):
    """A ``-- plan`` line that does not parse, or names a case the query does not have."""


@dataclass(frozen=True, slots=True)
class Clause:
    """One parsed clause of a ``-- plan`` line."""

    kind: str
    text: str
    cases: tuple[str, ...] | None
    table: str | None = None
    names: tuple[str, ...] = ()
    limit: int = 0

    def binds(self, case: str) -> bool:
        """True when the clause applies to ``case``."""
        return self.cases is None or case in self.cases

    @property
    def executed(self) -> bool:
        """True for the clauses checked on an execution (EXPLAIN ANALYZE), not the plan."""
        return self.kind in ("buffers", "removed")


@dataclass(frozen=True, slots=True)
class Violation:
    """A case whose plan broke a rule."""

    case: str
    rule: str
    found: str

    def message(self, where: str) -> str:
        """One line naming the query (``where``), the case, the rule and what broke it."""
        return f"{where} [{self.case}]: plan rule {self.rule!r} broken: {self.found}"


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(","))


def parse_rules(lines: Iterable[RuleLine], cases: Sequence[str]) -> list[Clause]:
    """The clauses of a query's ``-- plan`` lines; RuleError names the first bad one."""
    clauses: list[Clause] = []
    for line in lines:
        for unknown in set(line.cases or ()) - set(cases):
            raise RuleError(f"{line.where}: no case {unknown!r} (cases: {', '.join(cases)})")
        for raw in line.text.split(";"):
            text = raw.strip()
            if not text:
                continue
            clauses.append(_clause(text, line))
    return clauses


def _clause(text: str, line: RuleLine) -> Clause:
    for kind, form in _FORMS:
        match = form.match(text)
        if not match:
            continue
        if kind == "index":
            return Clause(kind, text, line.cases, names=(match.group(1),))
        if kind == "only":
            return Clause(kind, text, line.cases, match.group(1), _names(match.group(2)))
        if kind == "no-seq":
            return Clause(kind, text, line.cases, names=_names(match.group(1)))
        if kind == "seq-ok":
            return Clause(kind, text, line.cases, match.group(1))
        if kind in ("buffers", "removed"):
            return Clause(kind, text, line.cases, limit=int(match.group(1)))
        return Clause(kind, text, line.cases)
    raise RuleError(
        f"{line.where}: cannot read the plan rule {text!r} (see jobrun_tools.plans.rules)"
    )


def reads(root: Mapping[str, Any]) -> dict[str, list[str]]:
    """How the plan reads each relation: table -> ["Seq Scan", "jobs_pkey", ...]."""
    found: dict[str, list[str]] = {}
    for node in walk(root):
        kind = str(node["Node Type"])
        if kind not in _SCANS or "Relation Name" not in node:
            continue
        if kind == "Bitmap Heap Scan":
            ways = [str(n["Index Name"]) for n in walk(node) if "Index Name" in n]
        elif "Index Name" in node:
            ways = [str(node["Index Name"])]
        else:
            ways = [kind]
        found.setdefault(str(node["Relation Name"]), []).extend(ways)
    return found


def executed_figures(root: Mapping[str, Any]) -> tuple[int, int]:
    """(shared buffers touched, rows thrown away by filters) of an analyzed plan."""
    buffers = int(root.get("Shared Hit Blocks", 0)) + int(root.get("Shared Read Blocks", 0))
    removed = sum(
        int(n.get("Rows Removed by Filter", 0))
        + int(n.get("Rows Removed by Join Filter", 0))
        + int(n.get("Rows Removed by Index Recheck", 0))
        for n in walk(root)
    )
    return buffers, removed


def check(
    clauses: Sequence[Clause],
    case: str,
    plan: Mapping[str, Any],
    analyzed: Mapping[str, Any] | None,
) -> list[Violation]:
    """The rules ``case`` breaks: structural ones on ``plan``, executed ones on ``analyzed``."""
    bound = [c for c in clauses if c.binds(case)]
    read = reads(plan)
    broken: list[Violation] = []
    waived = {c.table for c in bound if c.kind == "seq-ok"}
    for table in DEFAULT_TABLES:
        if table not in waived and "Seq Scan" in read.get(table, []):
            rule = f"default: no seq scan on {table}"
            broken.append(Violation(case, rule, f"reads {table} by Seq Scan"))
    for clause in bound:
        found = _broken(clause, plan, read, analyzed)
        if found:
            broken.append(Violation(case, clause.text, found))
    return broken


def _broken(
    clause: Clause,
    plan: Mapping[str, Any],
    read: Mapping[str, list[str]],
    analyzed: Mapping[str, Any] | None,
) -> str | None:
    if clause.kind == "index":
        used = sorted({w for ways in read.values() for w in ways if not w.endswith("Scan")})
        if clause.names[0] not in used:
            return f"reads indexes {', '.join(used) or 'none'}"
    elif clause.kind == "only":
        assert clause.table is not None
        ways = read.get(clause.table, [])
        if not ways or any(w not in clause.names for w in ways):
            return f"reads {clause.table} by {', '.join(ways) or 'nothing'}"
    elif clause.kind == "no-seq":
        seq = [t for t in clause.names if "Seq Scan" in read.get(t, [])]
        if seq:
            return f"reads {', '.join(seq)} by Seq Scan"
    elif clause.kind == "no-sort":
        sorts = [n for n in walk(plan) if n["Node Type"] in ("Sort", "Incremental Sort")]
        if sorts:
            return f"sorts by {sorts[0].get('Sort Key')}"
    elif clause.executed:
        if analyzed is None:
            return "was not executed"
        buffers, removed = executed_figures(analyzed)
        figure = buffers if clause.kind == "buffers" else removed
        if figure > clause.limit:
            what = "buffers touched" if clause.kind == "buffers" else "rows removed"
            return f"{figure} {what}"
    return None
