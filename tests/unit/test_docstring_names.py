"""Every name a docstring or comment under ``src/jobrun`` points at exists.

Docstrings drift when code moves: a sentence naming ``store.complete_many``
after it was renamed tells the next reader something false. This test reads
each hand-written module as text and resolves

- every Sphinx cross-reference (``:func:`…```, ``:class:``, ``:meth:``,
  ``:attr:``, ``:data:``, ``:mod:``, ``:exc:``, ``:obj:``) in the module's own
  scope, in the class whose body holds the line, in the builtins, or as an
  importable dotted path;
- every backquoted dotted name that starts with ``jobrun.``, as an import;
- every backquoted ``store.<name>``, as a method of the PostgreSQL store.

The generated query layer (``jobrun/sqlc``) is left out: its docstrings are
copied from the SQL files' comments.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import jobrun

PACKAGE = Path(jobrun.__file__).parent
ROLE = re.compile(r":(?:func|class|meth|data|mod|attr|exc|obj):`~?([^`<]+?)(?:\s*<([^>]+)>)?`")
DOTTED = re.compile(r"``?(jobrun(?:\.\w+)+)(?:\(\))?``?")
STORE_CALL = re.compile(r"``?store\.(\w+)(?:\(\))?``?")
_MISSING = object()


def _import_prefix(parts: list[str]) -> tuple[Any, list[str]] | None:
    """The longest importable module prefix of ``parts`` and the names after it."""
    for i in range(len(parts), 0, -1):
        try:
            return importlib.import_module(".".join(parts[:i])), parts[i:]
        except ImportError:
            continue
    return None


def _walk(obj: Any, names: list[str]) -> bool:
    for name in names:
        found = getattr(obj, name, _MISSING)
        if found is _MISSING:
            # A dataclass or pydantic field, or an attribute only annotated on the class.
            return isinstance(obj, type) and any(
                name in getattr(base, "__annotations__", {}) for base in obj.__mro__
            )
        obj = found
    return True


def resolves(target: str, scopes: list[Any]) -> bool:
    """Whether ``target`` names something in one of ``scopes`` or as an import."""
    parts = target.strip().lstrip("~.").removesuffix("()").split(".")
    if any(_walk(scope, parts) for scope in scopes):
        return True
    imported = _import_prefix(parts)
    return imported is not None and _walk(*imported)


def _classes_by_line(module: ModuleType, source: str) -> list[tuple[int, int, Any]]:
    """(first line, last line, class object) for every class the module defines."""
    found: list[tuple[int, int, Any]] = []

    def visit(node: ast.AST, owner: Any) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                cls = getattr(owner, child.name, None)
                if cls is not None:
                    found.append((child.lineno, child.end_lineno or child.lineno, cls))
                    visit(child, cls)

    visit(ast.parse(source), module)
    return found


def _hand_written_modules() -> list[tuple[str, Path]]:
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent)
        if relative.parts[:2] == ("jobrun", "sqlc") or "sqlc" in relative.parts[2:3]:
            continue
        name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
        modules.append((name, path))
    return modules


def _unresolved(module_name: str, path: Path) -> list[str]:
    from jobrun.postgres.store import Store

    module = importlib.import_module(module_name)
    source = path.read_text()
    classes = _classes_by_line(module, source)
    bad = []
    for lineno, line in enumerate(source.splitlines(), 1):
        enclosing = [cls for first, last, cls in classes if first <= lineno <= last]
        scopes = [*reversed(enclosing), module, builtins]
        for match in ROLE.finditer(line):
            if not resolves(match.group(2) or match.group(1), scopes):
                bad.append(f"{path.name}:{lineno}: {match.group(0)}")
        for match in DOTTED.finditer(line):
            if not resolves(match.group(1), []):
                bad.append(f"{path.name}:{lineno}: {match.group(0)}")
        for match in STORE_CALL.finditer(line):
            if not hasattr(Store, match.group(1)):
                bad.append(f"{path.name}:{lineno}: {match.group(0)} (no such store method)")
    return bad


@pytest.mark.parametrize(("module_name", "path"), _hand_written_modules(), ids=lambda v: str(v))
def test_names_in_docstrings_and_comments_exist(module_name: str, path: Path) -> None:
    assert _unresolved(module_name, path) == []


def test_the_check_catches_a_name_that_does_not_exist() -> None:
    assert not resolves("jobrun.domain.Store", [])
    assert not resolves("complete_many", [importlib.import_module("jobrun.postgres.store").Store])
    assert resolves("jobrun.postgres.store.Store.complete", [])
    assert resolves("datetime.timedelta", [])
