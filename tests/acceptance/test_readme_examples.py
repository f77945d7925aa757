"""The README's code examples: every Python block parses, and the testing example runs.

The "Testing your handlers" example is a complete test module; it is run here
as a user would run it, in its own pytest process with the plugin loaded from
jobrun's entry point, against the session's server. Other blocks are
fragments (they use ``await`` at top level, or your own ``mailer``), so they
are only checked to parse.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n### {title}\n")
    following = re.compile(r"^#{2,3} ", re.M).search(text, start + len(title) + 6)
    return text[start : following.start() if following else len(text)]


def test_every_python_block_parses() -> None:
    blocks = BLOCK.findall(README.read_text())
    assert blocks
    for block in blocks:
        compile(block, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_the_testing_example_passes_as_a_users_test_module(
    pytester: pytest.Pytester, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = BLOCK.findall(section("Testing your handlers"))
    tests = len(re.findall(r"^(?:async )?def test_", example, re.M))
    assert tests >= 3
    monkeypatch.setenv("JOBRUN_TEST_DATABASE_URL", pg_admin_url)
    pytester.makeini(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytester.makepyfile(test_jobs=example)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=tests)
