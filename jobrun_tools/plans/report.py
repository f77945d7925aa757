"""Plan every case of every query on the scale database, check the rules, write or compare.

Two passes over one connection, with the planner's settings pinned to
PostgreSQL's defaults (:data:`PLANNER_SETTINGS`), so a server's own
configuration never shows in a plan. The first pass EXPLAINs every case (in
a transaction that is rolled back, after the case's setup) and renders the
plans; nothing has been executed yet, so no case's leftovers (rolled-back
row versions) can sway another's estimates. The second pass executes every
case under EXPLAIN (ANALYZE, BUFFERS), rolled back too, for the rules that
bound what an execution reads; a case that fails to execute fails the
report, so a case's parameters are known to work.
"""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from jobrun_tools.plans.capture import capture
from jobrun_tools.plans.cases import Case, Facts, all_cases
from jobrun_tools.plans.catalog import QUERY_SETS, ROOT, Query, load_queries
from jobrun_tools.plans.render import render_plan
from jobrun_tools.plans.rules import RuleError, check, executed_figures, parse_rules
from jobrun_tools.sqlc import scale as scale_queries
from jobrun_tools.sqlc import scale_detector as detector_queries

__all__ = ["PLANNER_SETTINGS", "Outcome", "plan_queries"]

PLANNER_SETTINGS = {
    "seq_page_cost": "1",
    "random_page_cost": "4",
    "cpu_tuple_cost": "0.01",
    "cpu_index_tuple_cost": "0.005",
    "cpu_operator_cost": "0.0025",
    "parallel_setup_cost": "1000",
    "parallel_tuple_cost": "0.1",
    "min_parallel_table_scan_size": "8MB",
    "min_parallel_index_scan_size": "512kB",
    "max_parallel_workers_per_gather": "2",
    "effective_cache_size": "4GB",
    "work_mem": "4MB",
    "hash_mem_multiplier": "2",
    "jit": "off",
    "geqo_threshold": "12",
    "from_collapse_limit": "8",
    "join_collapse_limit": "8",
    "cursor_tuple_fraction": "0.1",
    "plan_cache_mode": "auto",
    "constraint_exclusion": "partition",
    **{
        f"enable_{kind}": "on"
        for kind in (
            "bitmapscan",
            "gathermerge",
            "hashagg",
            "hashjoin",
            "incremental_sort",
            "indexonlyscan",
            "indexscan",
            "material",
            "memoize",
            "mergejoin",
            "nestloop",
            "parallel_append",
            "parallel_hash",
            "partition_pruning",
            "seqscan",
            "sort",
            "tidscan",
        )
    },
}
"""Every planner setting the plans depend on, at PostgreSQL's default, JIT off."""


@dataclass(slots=True)
class Outcome:
    """What a report run found."""

    files: dict[Path, str] = field(default_factory=dict)
    """Every file the run produced, by path relative to the repository, with its text."""
    violations: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    figures: list[tuple[int, str]] = field(default_factory=list)
    """(buffers, a printable line) of every executed case: measured, never written."""


def _explain(conn: psycopg.Connection[Any], case: Case, options: str) -> Mapping[str, Any]:
    with conn.transaction(force_rollback=True):
        given = case.setup(conn) if case.setup else {}
        statement = capture(lambda: case.call(given))
        text = f"EXPLAIN ({options}FORMAT JSON) " + statement.text
        row = (
            conn.execute(text, statement.params).fetchone()
            if statement.params is not None
            else conn.execute(text).fetchone()
        )
    assert row is not None
    document = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    top: Mapping[str, Any] = document[0]
    return top


def _facts(conn: psycopg.Connection[Any], now: Any) -> Facts:
    jobs = scale_queries.Querier(conn).scale_facts(now=now)
    detector = detector_queries.Querier(conn).scale_detector_facts()
    assert jobs is not None and detector is not None
    return Facts(now=now, jobs=jobs, detector=detector)


def _unplanned(query: Query) -> str | None:
    """Why PostgreSQL cannot EXPLAIN the query, or None when it can."""
    if query.command == "copyfrom":
        return "a COPY ... FROM STDIN (bulk load): PostgreSQL does not plan it"
    first = query.statement.lstrip().split(None, 1)[0].upper()
    if first in ("ANALYZE", "VACUUM"):
        return f"a utility statement ({first}): PostgreSQL does not plan it"
    return None


def plan_queries(
    url: str, now: Any, header: str, *, only: Sequence[str] = (), say: Any = print
) -> Outcome:
    """Plan, render and check every query (or those in ``only``) on the database at ``url``."""
    outcome = Outcome()
    with psycopg.connect(url, autocommit=True) as conn:
        scale = scale_queries.Querier(conn)
        for name, value in PLANNER_SETTINGS.items():
            scale.scale_setting(name=name, value=value)
        facts = _facts(conn, now)
        cases = all_cases(facts)
        planned: list[tuple[Query, list[Case], list[Mapping[str, Any]]]] = []
        started = time.perf_counter()
        for query_set in QUERY_SETS:
            for query in load_queries(query_set):
                if only and query.name not in only:
                    continue
                found = cases[query_set.name].get(query.name, [])
                reason = _unplanned(query)
                lines = [f"# {query.name} ({query.source})", f"# {header}", ""]
                if reason:
                    outcome.files[query.plan_file.relative_to(ROOT)] = "\n".join(
                        [*lines, reason, ""]
                    )
                    continue
                if not found:
                    outcome.failures.append(
                        f"{query.source}: {query.name} has no case: add one in "
                        f"jobrun_tools/plans/cases_*.py (the parameters it is planned with)"
                    )
                    continue
                plans = []
                for case in found:
                    try:
                        plan = _explain(conn, case, "")["Plan"]
                    except (psycopg.Error, RuntimeError) as exc:
                        outcome.failures.append(
                            f"{query.source}: {query.name} [{case.label}]: EXPLAIN failed: {exc}"
                        )
                        continue
                    plans.append(plan)
                    lines += [f"## {case.label}: {case.about}", *render_plan(plan), ""]
                outcome.files[query.plan_file.relative_to(ROOT)] = "\n".join(lines)
                planned.append((query, found, plans))
        say(f"planned {len(planned)} queries ({time.perf_counter() - started:.1f} s)")
        started = time.perf_counter()
        for query, found, plans in planned:
            _check(conn, query, found, plans, outcome)
        say(f"executed and checked them ({time.perf_counter() - started:.1f} s)")
    return outcome


def _check(
    conn: psycopg.Connection[Any],
    query: Query,
    found: Sequence[Case],
    plans: Sequence[Mapping[str, Any]],
    outcome: Outcome,
) -> None:
    where = f"{query.source}: {query.name}"
    try:
        clauses = parse_rules(query.rules, [c.label for c in found])
    except RuleError as exc:
        outcome.failures.append(str(exc))
        return
    for case, plan in zip(found, plans, strict=False):
        analyzed = None
        if case.executes:
            try:
                top = _explain(conn, case, "ANALYZE, BUFFERS, ")
            except (psycopg.Error, RuntimeError) as exc:
                outcome.failures.append(f"{where} [{case.label}]: executing it failed: {exc}")
                continue
            analyzed = top["Plan"]
            buffers, removed = executed_figures(analyzed)
            outcome.figures.append(
                (
                    buffers,
                    f"{query.name} [{case.label}]: {buffers:,} buffers, {removed:,} rows removed, "
                    f"{float(top.get('Execution Time', 0)):.1f} ms",
                )
            )
        for violation in check(clauses, case.label, plan, analyzed):
            outcome.violations.append(violation.message(where))


def compare(
    produced: Mapping[Path, str], base: Path, folders: Iterable[Path], *, partial: bool
) -> list[str]:
    """The differences between ``produced`` and the files under ``base``, as printable text.

    ``produced`` and ``folders`` are relative to ``base`` (the repository, or
    an ``--out`` directory). Files ``*.txt`` under ``folders`` that the run did
    not produce are stale (a query was removed or renamed), unless the run was
    ``partial``.
    """
    out: list[str] = []
    committed = {p.relative_to(base) for folder in folders for p in (base / folder).rglob("*.txt")}
    for path in sorted(set(produced) | (set() if partial else committed)):
        new = produced.get(path)
        old = (base / path).read_text(encoding="utf-8") if (base / path).is_file() else None
        if new == old:
            continue
        if new is None:
            out.append(f"stale: {path} (no query produces it any more)")
            continue
        diff = difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            f"a/{path}",
            f"b/{path}",
        )
        out.append("".join(diff) if old is not None else f"missing: {path}")
    return out


def write(
    produced: Mapping[Path, str], base: Path, folders: Iterable[Path], *, partial: bool
) -> int:
    """Write ``produced`` under ``base``, remove stale ``*.txt`` files; return files changed."""
    changed = 0
    if not partial:
        for folder in folders:
            for stale in (base / folder).rglob("*.txt"):
                if stale.relative_to(base) not in produced:
                    stale.unlink()
                    changed += 1
    for path, text in produced.items():
        target = base / path
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        changed += 1
    return changed
