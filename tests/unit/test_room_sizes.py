"""Small rooms: no hand-written module under src/ past 500 lines, no class past 300, no
function past 80. The query layer sqlc generates (``jobrun.sqlc``) is left out."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "jobrun"
LIMITS = {"module": 500, "class": 300, "function": 80}


def _oversized() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if "sqlc" in path.relative_to(SRC).parts:
            continue
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(SRC.parent)
        if len(text.splitlines()) > LIMITS["module"]:
            found.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                kind = "class"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                kind = "function"
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > LIMITS[kind]:
                found.append(f"{name}:{node.lineno} {kind} {node.name}: {lines} lines")
    return found


def test_no_room_outgrows_its_limit() -> None:
    assert len(list(SRC.rglob("*.py"))) > 100  # the walk found the package
    assert _oversized() == []
