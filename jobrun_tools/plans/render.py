"""A plan as text a reviewer reads and a diff compares: its shape, never its costs.

EXPLAIN (FORMAT JSON) gives every node with its costs, widths and estimated
rows. Costs move with the last digits of every statistic and would make each
run a change, so they are left out; what a review needs stays: the nodes and
their nesting (join order and join methods), the relations and indexes read,
the conditions each node applies, and the estimated rows rounded to the
nearest power of ten (``rows~1k``), so a plan that expects a thousand rows and
one that expects a million read differently while ANALYZE's last digits do
not. Values the report's parameters put into a plan (times derived from the
build's clock, long arrays) are written as placeholders.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["bucket", "render_plan", "walk"]

# The node's own conditions, in the order EXPLAIN's text format prints them.
_CONDITIONS = (
    "Hash Cond",
    "Merge Cond",
    "Index Cond",
    "Recheck Cond",
    "TID Cond",
    "Join Filter",
    "One-Time Filter",
    "Filter",
    "Order By",
    "Cache Key",
    "Cache Mode",
    "Conflict Resolution",
    "Conflict Arbiter Indexes",
    "Conflict Filter",
    "Sort Key",
    "Presorted Key",
    "Group Key",
    "Workers Planned",
)
# How EXPLAIN's text format names a join of another type than inner.
_JOINS = {"Nested Loop": "Nested Loop", "Hash Join": "Hash", "Merge Join": "Merge"}
_TIMESTAMP = re.compile(r"'[^']*'::timestamp(?:tz| with time zone| without time zone)")
_ARRAY = re.compile(r"'\{([^']*)\}'::([a-z_ ]+)\[\]")


def walk(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The node and every node under it, depth first."""
    yield node
    for child in node.get("Plans", ()):
        yield from walk(child)


def bucket(rows: float) -> str:
    """Estimated rows to the nearest power of ten, as ``~1``, ``~100``, ``~10k``, ``~1M``."""
    if rows < 1:
        return "~1"
    power = math.floor(math.log10(rows) + 0.5)
    for unit, name in ((9, "G"), (6, "M"), (3, "k")):
        if power >= unit:
            return f"~{10 ** (power - unit)}{name}"
    return f"~{10**power}"


def _scrub(text: str) -> str:
    text = _TIMESTAMP.sub("'<time>'::timestamp with time zone", text)

    def array(match: re.Match[str]) -> str:
        items = match.group(1)
        count = 0 if not items else items.count(",") + 1
        if len(match.group(0)) <= 72:
            return match.group(0)
        return f"'{{<{count} values>}}'::{match.group(2)}[]"

    return _ARRAY.sub(array, text)


def _label(node: Mapping[str, Any]) -> str:
    kind = str(node["Node Type"])
    if kind == "Aggregate":
        strategy = {"Sorted": "GroupAggregate", "Hashed": "HashAggregate"}
        kind = strategy.get(str(node.get("Strategy")), "Aggregate")
        if node.get("Strategy") == "Mixed":
            kind = "MixedAggregate"
    if node.get("Partial Mode") in ("Partial", "Finalize"):
        kind = f"{node['Partial Mode']} {kind}"
    join = node.get("Join Type", "Inner")
    if join != "Inner" and kind in _JOINS:
        kind = f"{_JOINS[kind]} {join} Join"
    if kind == "ModifyTable":
        kind = str(node.get("Operation", "Modify"))
    if kind == "SetOp":
        kind = f"{'HashSetOp' if node.get('Strategy') == 'Hashed' else 'SetOp'} {node['Command']}"
    if node.get("Scan Direction") == "Backward":
        kind += " Backward"
    if "Index Name" in node:
        kind += f" using {node['Index Name']}"
    target = node.get("Relation Name") or node.get("CTE Name") or node.get("Function Name")
    alias = node.get("Alias")
    if target:
        kind += f" on {target}" + (f" {alias}" if alias and alias != target else "")
    elif alias and kind in ("Subquery Scan", "WorkTable Scan", "Values Scan", "Result"):
        kind += f" on {alias}"
    return kind


def render_plan(root: Mapping[str, Any]) -> list[str]:
    """The plan under ``root`` (a JSON plan's ``Plan``) as indented lines."""
    lines: list[str] = []
    _render(root, 0, lines)
    return lines


def _render(node: Mapping[str, Any], depth: int, lines: list[str]) -> None:
    if node.get("Subplan Name"):
        lines.append(f"{'  ' * depth}{node['Subplan Name']}")
        depth += 1
    pad = "  " * depth
    arrow = "-> " if depth else ""
    lines.append(f"{pad}{arrow}{_label(node)}  rows{bucket(float(node.get('Plan Rows', 0)))}")
    for key in _CONDITIONS:
        if key in node:
            value = node[key]
            text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
            lines.append(f"{pad}     {key}: {_scrub(text)}")
    for child in node.get("Plans", ()):
        _render(child, depth + 1, lines)
