"""The plan report's pieces without a database: rule lines, rule checks, plan text."""

from __future__ import annotations

from typing import Any

import pytest
from jobrun_tools.plans.catalog import QUERY_SETS, RuleLine, load_queries
from jobrun_tools.plans.render import bucket, render_plan
from jobrun_tools.plans.rules import RuleError, check, parse_rules


def _line(text: str, cases: tuple[str, ...] | None = None) -> RuleLine:
    return RuleLine(cases, text, "db/query/x.sql:3")


def _scan(kind: str, table: str, index: str | None = None, **more: Any) -> dict[str, Any]:
    node: dict[str, Any] = {"Node Type": kind, "Relation Name": table, "Plan Rows": 10, **more}
    if index:
        node["Index Name"] = index
    return node


def _limit(*children: dict[str, Any]) -> dict[str, Any]:
    return {"Node Type": "Limit", "Plan Rows": 50, "Plans": list(children)}


def test_every_clause_form_parses_and_a_case_scope_binds_only_its_cases() -> None:
    clauses = parse_rules(
        [
            _line("index jobs_claim_idx; jobs only by index jobs_claim_idx, jobs_pkey"),
            _line("no seq scan on jobs, job_events; no sort", ("dead",)),
            _line("seq scan on jobs: it counts every job; buffers <= 150; rows removed <= 500"),
        ],
        ["dead", "all"],
    )
    assert [c.kind for c in clauses] == [
        "index", "only", "no-seq", "no-sort", "seq-ok", "buffers", "removed",
    ]  # fmt: skip
    assert clauses[1].names == ("jobs_claim_idx", "jobs_pkey")
    assert clauses[2].binds("dead") and not clauses[2].binds("all")
    assert clauses[5].limit == 150


def test_a_rule_that_does_not_parse_names_its_line() -> None:
    with pytest.raises(RuleError, match=r"db/query/x.sql:3: cannot read the plan rule 'fast'"):
        parse_rules([_line("fast")], ["all"])


def test_a_rule_naming_a_case_the_query_lacks_is_refused() -> None:
    with pytest.raises(RuleError, match=r"no case 'dead'"):
        parse_rules([_line("no sort", ("dead",))], ["all"])


def test_a_seq_scan_of_a_growing_table_breaks_the_default_rule_unless_the_query_says_why() -> None:
    plan = _limit(_scan("Seq Scan", "jobs"))
    [broken] = check([], "all", plan, None)
    assert broken.rule == "default: no seq scan on jobs"
    waived = parse_rules([_line("seq scan on jobs: it counts every job")], ["all"])
    assert check(waived, "all", plan, None) == []
    # Small tables are not the default rule's business.
    assert check([], "all", _limit(_scan("Seq Scan", "queues")), None) == []


def test_only_by_index_is_broken_by_any_other_way_of_reading_the_table() -> None:
    clauses = parse_rules([_line("jobs only by index jobs_dead_cancelled_idx")], ["dead"])
    good = _limit(_scan("Index Scan", "jobs", "jobs_dead_cancelled_idx"))
    bad = _limit(_scan("Index Scan", "jobs", "jobs_pkey", Filter="(state = 'dead')"))
    assert check(clauses, "dead", good, None) == []
    [broken] = check(clauses, "dead", bad, None)
    assert broken.message("db/query/jobs.sql: JobList") == (
        "db/query/jobs.sql: JobList [dead]: plan rule 'jobs only by index "
        "jobs_dead_cancelled_idx' broken: reads jobs by jobs_pkey"
    )


def test_a_bitmap_scan_reads_the_index_under_it() -> None:
    clauses = parse_rules([_line("jobs only by index jobs_leased_idx")], ["leased"])
    bitmap = _scan(
        "Bitmap Heap Scan",
        "jobs",
        Plans=[{"Node Type": "Bitmap Index Scan", "Index Name": "jobs_leased_idx"}],
    )
    assert check(clauses, "leased", _limit(bitmap), None) == []


def test_executed_bounds_are_checked_on_the_analyzed_plan() -> None:
    clauses = parse_rules([_line("buffers <= 150; rows removed <= 10")], ["idle"])
    plan = _limit(_scan("Index Scan", "jobs", "jobs_claim_idx"))
    analyzed = {
        "Node Type": "Limit",
        "Shared Hit Blocks": 140,
        "Shared Read Blocks": 20,
        "Plans": [{"Node Type": "Index Scan", "Rows Removed by Filter": 11}],
    }
    broken = check(clauses, "idle", plan, analyzed)
    assert [(b.rule, b.found) for b in broken] == [
        ("buffers <= 150", "160 buffers touched"),
        ("rows removed <= 10", "11 rows removed"),
    ]
    [unexecuted] = check(clauses[:1], "idle", plan, None)
    assert unexecuted.found == "was not executed"


def test_no_sort_is_broken_by_a_sort_node() -> None:
    clauses = parse_rules([_line("no sort")], ["all"])
    sorted_plan = _limit({"Node Type": "Sort", "Sort Key": ["id DESC"], "Plans": []})
    [broken] = check(clauses, "all", sorted_plan, None)
    assert broken.found == "sorts by ['id DESC']"


@pytest.mark.parametrize(
    ("rows", "text"),
    [(0, "~1"), (1, "~1"), (3, "~1"), (4, "~10"), (51, "~100"), (2_999, "~1k"), (1e6, "~1M")],
)
def test_estimated_rows_round_to_the_nearest_power_of_ten(rows: float, text: str) -> None:
    assert bucket(rows) == text


def test_a_plan_renders_its_shape_without_costs_or_the_clock() -> None:
    plan = {
        "Node Type": "Limit",
        "Plan Rows": 51,
        "Total Cost": 12.5,
        "Plans": [
            {
                "Node Type": "Index Scan",
                "Scan Direction": "Backward",
                "Index Name": "jobs_pkey",
                "Relation Name": "jobs",
                "Alias": "jobs",
                "Plan Rows": 120_000,
                "Total Cost": 99.0,
                "Filter": "(created_at >= '2026-12-03 09:00:00+00'::timestamp with time zone)",
            },
            {
                "Node Type": "Hash Join",
                "Join Type": "Left",
                "Plan Rows": 7,
                "Subplan Name": "CTE waiting",
                "Hash Cond": "(a.queue = b.queue)",
            },
        ],
    }
    assert render_plan(plan) == [
        "Limit  rows~100",
        "  -> Index Scan Backward using jobs_pkey on jobs  rows~100k",
        "       Filter: (created_at >= '<time>'::timestamp with time zone)",
        "  CTE waiting",
        "    -> Hash Left Join  rows~10",
        "         Hash Cond: (a.queue = b.queue)",
    ]


def test_every_query_file_is_read_and_the_declared_rules_parse() -> None:
    names = {q.name for qs in QUERY_SETS for q in load_queries(qs)}
    assert {"JobClaim", "JobList", "HitWindowMax"} <= names
    claim = next(q for q in load_queries(QUERY_SETS[0]) if q.name == "JobClaim")
    assert [r.text for r in claim.rules] == [
        "jobs only by index jobs_claim_idx, jobs_pkey",
        "buffers <= 150",
    ]
    assert claim.rules[1].cases == ("idle",)
    assert claim.plan_file.parts[-3:] == ("plans", "jobs", "JobClaim.txt")
