"""The README's and the site's code examples run, as written, against a real database.

Every Python block is one of three kinds, named by its first line:

* ``# myapp/<name>.py``: a module of the reader's application; written to a
  temporary ``myapp`` package that the other examples import.
* ``# example: async`` / ``# example: sync``: code a reader runs with ``url``
  pointing at their database; run here in that order, on a fresh database.
* ``# tests/test_jobs.py``: a complete test module; run as a user would run
  it, in its own pytest process with jobrun's plugin loaded from its entry
  point, with the ``# pyproject.toml`` block of the same page as its settings.
* ``# examples/<path>``: an excerpt of a file of an example project, which
  must appear in that file word for word; the example's own acceptance test
  runs the file (a Django project cannot share this process's settings).

A block of any other kind fails the test, so no example can slip in unrun.

Two documents are run, each on a database of its own: the README, and the
site under ``docs/``, whose pages are read in the order of ``mkdocs.yml``'s
navigation (a page the navigation leaves out fails the test, since its
examples would not be run in a known order). A ``myapp`` module a page
defines is seen by every example of its document, and every such module is
imported, so a module that nothing imports is still run.
"""

from __future__ import annotations

import ast
import asyncio
import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
TOML_BLOCK = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
NAV_PAGE = re.compile(r":\s+([\w./-]+\.md)\s*$", re.M)

KINDS = (
    "# myapp/",
    "# example: async",
    "# example: sync",
    "# tests/test_jobs.py",
    "# examples/",
)


@dataclass(frozen=True)
class Page:
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text()

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))


def site_pages() -> list[Page]:
    """The site's pages in the navigation's order."""
    return [Page(DOCS / name) for name in NAV_PAGE.findall((ROOT / "mkdocs.yml").read_text())]


DOCUMENTS = {"README": [Page(README)], "site": site_pages()}


def blocks(document: str) -> list[tuple[Page, str]]:
    return [(page, block) for page in DOCUMENTS[document] for block in BLOCK.findall(page.text)]


def test_every_page_of_the_site_is_in_the_navigation() -> None:
    in_nav = {page.path for page in site_pages()}
    on_disk = set(DOCS.rglob("*.md"))
    assert on_disk - in_nav == set(), "pages missing from mkdocs.yml's nav"
    assert in_nav - on_disk == set(), "nav entries with no page"


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_python_block_parses_and_is_of_a_kind_that_runs(document: str) -> None:
    found = blocks(document)
    assert found
    for page, block in found:
        compile(block, page.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        assert block.startswith(KINDS), f"{page.name}: block of no runnable kind:\n{block[:200]}"


@pytest.mark.parametrize("document", DOCUMENTS)
async def test_the_application_examples_run_in_order(
    document: str, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = blocks(document)
    package = tmp_path / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    modules: dict[str, str] = {}
    for page, block in found:
        if block.startswith("# myapp/"):
            name = block.splitlines()[0].removeprefix("# myapp/").strip()
            # One application per document: a module two pages define must be one module.
            assert modules.setdefault(name, block) == block, f"{page.name}: myapp/{name} differs"
            (package / name).write_text(block)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("JOBRUN_DATABASE_URL", raising=False)
    for name in [m for m in sys.modules if m == "myapp" or m.startswith("myapp.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in modules:
        importlib.import_module(f"myapp.{name.removesuffix('.py')}")
    ran = 0
    for page, block in found:
        if block.startswith("# example: async"):
            code = compile(block, page.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, {"url": db_url})  # top-level await makes it a coroutine
            if result is not None:
                await result
            ran += 1
        elif block.startswith("# example: sync"):
            code = compile(block, page.name, "exec")
            await asyncio.to_thread(exec, code, {"url": db_url})
            ran += 1
    assert ran >= 2


TESTING_PAGES = [
    page.name
    for pages in DOCUMENTS.values()
    for page in pages
    if any(block.startswith("# tests/test_jobs.py") for block in BLOCK.findall(page.text))
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_excerpt_of_an_example_project_is_in_its_file(document: str) -> None:
    for page, block in blocks(document):
        if block.startswith("# examples/"):
            first, _, body = block.partition("\n")
            path = ROOT / first.removeprefix("# ").strip()
            assert path.is_file(), f"{page.name}: no file {path}"
            assert body.strip() in path.read_text(), f"{page.name}: excerpt not in {path}"


def test_the_site_has_a_testing_example() -> None:
    assert "docs/guide/testing.md" in TESTING_PAGES


@pytest.mark.parametrize("page_name", TESTING_PAGES)
def test_the_testing_example_passes_as_a_users_test_module(
    page_name: str, pytester: pytest.Pytester, pg_admin_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (ROOT / page_name).read_text()
    (example,) = [b for b in BLOCK.findall(text) if b.startswith("# tests/test_jobs.py")]
    # The pytest settings are the page's own block, so a reader who copies
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
