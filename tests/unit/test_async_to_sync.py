"""scripts/async-to-sync: the sync store is the async source, converted, and CI notices drift."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The store is one module per group of methods; these tests edit two of them.
CORE = "src/jobrun/postgres/store_core.py"
CORE_SYNC = "src/jobrun/postgres/store_core_sync.py"
ENQUEUEING_SYNC = "src/jobrun/postgres/enqueueing_sync.py"
SCHEDULES_SYNC = "src/jobrun/postgres/schedules_sync.py"
# The Store contract's tests are converted too.
TESTS = "tests/integration/test_store.py"
TESTS_SYNC = "tests/integration/test_store_sync.py"


def repo_copy(tmp_path: Path) -> Path:
    """The package and the ruff settings the script formats with (isort needs the package)."""
    dest = tmp_path / "repo"
    for name in ("pyproject.toml", "scripts/async-to-sync", TESTS, TESTS_SYNC):
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "src" / "jobrun",
        dest / "src" / "jobrun",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return dest


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The copy has no .venv: the script finds ruff on PATH, next to this interpreter.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        [sys.executable, str(repo / "scripts" / "async-to-sync"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(path).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_checked_in_twins_are_up_to_date(tmp_path: Path) -> None:
    repo = repo_copy(tmp_path)
    result = run(repo, "--check")
    assert result.returncode == 0, result.stderr


def test_check_names_a_hand_edited_twin_and_leaves_the_tree_alone(tmp_path: Path) -> None:
    repo = repo_copy(tmp_path)
    twin = repo / ENQUEUEING_SYNC
    twin.write_text(twin.read_text().replace("def enqueue(", "def enqueue_edited(", 1))
    before = digest(repo)
    stale = run(repo, "--check")
    assert stale.returncode == 1
    assert f"stale: {ENQUEUEING_SYNC} differs" in stale.stderr
    assert SCHEDULES_SYNC not in stale.stderr
    assert "+    def enqueue(" in stale.stderr  # the diff shows what regenerating restores
    assert digest(repo) == before

    (repo / SCHEDULES_SYNC).unlink()
    stale = run(repo, "--check")
    assert stale.returncode == 1
    assert f"stale: {SCHEDULES_SYNC} is missing" in stale.stderr


def test_an_edit_of_the_async_source_reaches_the_twin(tmp_path: Path) -> None:
    repo = repo_copy(tmp_path)
    source = repo / CORE
    source.write_text(
        source.read_text().replace(
            "    async def now(self) -> datetime:",
            "    async def probe(self) -> datetime:\n"
            '        """A probe."""\n'
            "        async with self._connection() as conn:\n"
            "            return await system_queries.AsyncQuerier(conn).database_now()\n\n"
            "    async def unwanted(self) -> None:  # sync: skip\n"
            '        """Only for the async store."""\n\n'
            "    async def now(self) -> datetime:",
            1,
        )
    )
    assert run(repo, "--check").returncode == 1
    result = run(repo)
    assert result.returncode == 0, result.stderr
    assert CORE_SYNC in result.stdout
    twin = (repo / CORE_SYNC).read_text()
    assert "    def probe(self) -> datetime:" in twin
    assert "with self._connection() as conn:" in twin
    assert "return system_queries.Querier(conn).database_now()" in twin
    assert "unwanted" not in twin
    assert run(repo, "--check").returncode == 0


def test_a_construct_it_cannot_convert_fails_naming_file_and_line(tmp_path: Path) -> None:
    repo = repo_copy(tmp_path)
    source = repo / CORE
    text = source.read_text().replace(
        "from contextlib import", "import asyncio\nfrom contextlib import", 1
    )
    source.write_text(text)
    line = text.splitlines().index("import asyncio") + 1
    before = digest(repo)
    result = run(repo)
    assert result.returncode == 2
    assert f"{CORE}:{line}: cannot convert 'asyncio'" in result.stderr
    assert digest(repo) == before  # nothing written


def converted_test_module(tmp_path: Path, extra: str) -> str:
    """The sync twin of the Store contract's tests with ``extra`` appended to the source."""
    repo = repo_copy(tmp_path)
    source = repo / TESTS
    source.write_text(source.read_text() + extra)
    result = run(repo)
    assert result.returncode == 0, result.stderr
    return (repo / TESTS_SYNC).read_text()


def test_async_tests_and_fixtures_become_sync_ones(tmp_path: Path) -> None:
    twin = converted_test_module(
        tmp_path,
        "\n\n@pytest.fixture\n"
        "async def probe_fixture() -> AsyncIterator[int]:\n"
        "    yield 1\n\n\n"
        "async def test_probe(store: Store, probe_fixture: int) -> None:\n"
        "    async with store.pool.connection() as conn:\n"
        "        await conn.execute('SELECT 1')\n",
    )
    assert "@pytest.fixture\ndef probe_fixture() -> Iterator[int]:\n    yield 1" in twin
    assert "\ndef test_probe(store: SyncStore, probe_fixture: int) -> None:" in twin
    assert "    with store.pool.connection() as conn:\n        conn.execute(" in twin


def test_eventually_becomes_eventually_sync(tmp_path: Path) -> None:
    twin = converted_test_module(
        tmp_path,
        "\n\nasync def test_probe(store: Store) -> None:\n"
        "    await eventually(store.now, what='a clock')\n",
    )
    assert "from jobrun.testing import eventually_sync" in twin
    assert "    eventually_sync(store.now, what='a clock')" in twin.replace('"', "'")


def test_sync_else_keeps_the_if_body_in_the_source_and_the_else_body_in_the_twin(
    tmp_path: Path,
) -> None:
    twin = converted_test_module(
        tmp_path,
        "\n\nasync def test_probe() -> None:\n"
        "    if True:  # sync: else\n"
        "        await asyncio.gather(asyncio.sleep(0))\n"
        "    else:\n"
        "        time.sleep(0.25)\n",
    )
    probe = twin[twin.index("def test_probe() -> None:") :]
    assert probe.splitlines()[1] == "    time.sleep(0.25)"
    assert "gather" not in twin


def test_sync_else_without_an_else_branch_fails_naming_file_and_line(tmp_path: Path) -> None:
    repo = repo_copy(tmp_path)
    source = repo / TESTS
    text = (
        source.read_text() + "\n\ndef probe() -> None:\n    if True:  # sync: else\n        pass\n"
    )
    source.write_text(text)
    line = len(text.splitlines()) - 1  # the probe's `if`, the last but one line
    before = digest(repo)
    result = run(repo)
    assert result.returncode == 2
    assert f"{TESTS}:{line}: `# sync: else` needs an else branch" in result.stderr
    assert digest(repo) == before
