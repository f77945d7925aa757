"""The README's code examples run, as written, against a real database.

Every Python block is one of three kinds, named by its first line:

* ``# myapp/<name>.py``: a module of the reader's application; written to a
  temporary ``myapp`` package that the other examples import.
* ``# example: async`` / ``# example: sync``: code a reader runs with ``url``
  pointing at their database; run here in that order, on a fresh database.
* ``# tests/test_jobs.py``: a complete test module; run as a user would run
  it, in its own pytest process with jobrun's plugin loaded from its entry
  point.

A block of any other kind fails the test, so no example can slip in unrun.
"""

from __future__ import annotations

import ast
import asyncio
import re
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n### {title}\n")
    following = re.compile(r"^#{2,3} ", re.M).search(text, start + len(title) + 6)
    return text[start : following.start() if following else len(text)]


KINDS = ("# myapp/", "# example: async", "# example: sync", "# tests/test_jobs.py")


def test_every_python_block_parses_and_is_of_a_kind_that_runs() -> None:
    blocks = BLOCK.findall(README.read_text())
    assert blocks
    for block in blocks:
        compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        assert block.startswith(KINDS), f"README block of no runnable kind:\n{block[:200]}"


async def test_the_application_examples_run_in_order(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = BLOCK.findall(README.read_text())
    package = tmp_path / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for block in blocks:
        if block.startswith("# myapp/"):
            name = block.splitlines()[0].removeprefix("# myapp/").strip()
            (package / name).write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("JOBRUN_DATABASE_URL", raising=False)
    for name in [m for m in sys.modules if m == "myapp" or m.startswith("myapp.")]:
        monkeypatch.delitem(sys.modules, name)
    ran = 0
    for block in blocks:
        if block.startswith("# example: async"):
            code = compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, {"url": db_url})  # top-level await makes it a coroutine
            if result is not None:
                await result
            ran += 1
        elif block.startswith("# example: sync"):
            code = compile(block, "README.md", "exec")
            await asyncio.to_thread(exec, code, {"url": db_url})
            ran += 1
    assert ran >= 2


def test_the_testing_example_passes_as_a_users_test_module(
    pytester: pytest.Pytester, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = section("Testing your handlers")
    (example,) = BLOCK.findall(text)
    # The pytest settings are the README's own block, so a reader who copies
    # them gets what this test ran with.
    (settings,) = TOML_BLOCK.findall(text)
    assert settings.startswith("# pyproject.toml\n")
    tests = len(re.findall(r"^(?:async )?def test_", example, re.M))
    assert tests >= 3
    monkeypatch.setenv("JOBRUN_TEST_DATABASE_URL", pg_admin_url)
    pytester.makepyprojecttoml(settings)
    pytester.makepyfile(test_jobs=example)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    # No warnings either: an unset asyncio_default_fixture_loop_scope makes
    # pytest-asyncio warn on every run (on stderr, at configuration time, so
    # the outcome counts never see it).
    result.assert_outcomes(passed=tests, warnings=0)
    output = result.stdout.str() + result.stderr.str()
    assert "Warning" not in output, output
