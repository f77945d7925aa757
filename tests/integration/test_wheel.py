"""The built wheel is complete: install it in a fresh venv, migrate with it, check its files."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with only the built jobrun wheel installed in it.

    Its dependencies come from the test venv's site-packages through a .pth file
    (no downloads); the test venv's editable jobrun is not on that path.
    """
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(work)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    wheel = next(work.glob("jobrun-*.whl"))
    (work / "contents.txt").write_text("\n".join(zipfile.ZipFile(wheel).namelist()))
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return venv


def test_installed_wheel_migrates_an_empty_database(wheel_venv: Path, empty_db_url: str) -> None:
    python = wheel_venv / "bin" / "python"
    where = subprocess.run(
        [str(python), "-c", "import jobrun, sys; print(jobrun.__file__)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=wheel_venv,
    ).stdout.strip()
    assert where.startswith(str(wheel_venv)), where
    assert (Path(where).parent / "migrations" / "00001_jobs.sql").is_file()

    env = {k: v for k, v in os.environ.items() if k != "JOBRUN_DATABASE_URL"}
    result = subprocess.run(
        [str(wheel_venv / "bin" / "jobrun"), "migrate", "--database-url", empty_db_url],
        capture_output=True,
        text=True,
        cwd=wheel_venv,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr

    with psycopg.connect(empty_db_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version_id FROM goose_db_version")]
    assert versions[0] == 0
    assert 1 in versions


def test_installed_wheel_registers_the_pytest_plugin(wheel_venv: Path) -> None:
    python = wheel_venv / "bin" / "python"
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import sys\n"
            "from importlib.metadata import entry_points\n"
            "for ep in entry_points(group='pytest11', name='jobrun'):\n"
            "    if str(ep.dist.locate_file('')).startswith(sys.prefix):\n"
            "        print(ep.value)\n",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=wheel_venv,
    ).stdout.split()
    assert found == ["jobrun.testing.pytest_plugin"]


def test_the_wheel_ships_no_benchmark_or_plan_check_support(wheel_venv: Path) -> None:
    # The plan checks and synthetic fills (jobrun_tools) serve the plan tests and the
    # benchmarks; the package users install carries the adapter only.
    names = (wheel_venv.parent / "contents.txt").read_text().splitlines()
    assert any(n.startswith("jobrun/postgres/store.py") for n in names)
    assert not [n for n in names if "claimplan" in n or n.startswith("jobrun_tools")]
    assert "jobrun/sqlc/jobs.py" in names
    python = wheel_venv / "bin" / "python"
    check = subprocess.run(
        [
            str(python),
            "-c",
            "import jobrun.sqlc.jobs as q; print(hasattr(q, 'JOB_FILL_SYNTHETIC'))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=wheel_venv,
    )
    assert check.stdout.strip() == "False"


def test_installed_wheel_reports_its_version(wheel_venv: Path) -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        version = tomllib.load(f)["project"]["version"]
    shown = subprocess.run(
        [str(wheel_venv / "bin" / "jobrun"), "--version"],
        check=True,
        capture_output=True,
        text=True,
        cwd=wheel_venv,
    ).stdout
    assert shown == f"jobrun {version}\n"


def check_contents(wheel: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check-wheel"), "--contents", str(wheel)],
        capture_output=True,
        text=True,
    )


def test_the_wheel_holds_everything_running_needs(wheel_venv: Path) -> None:
    # Migrations, generated queries, the demo's SQL, templates, static files, py.typed
    # and both entry points, as scripts/check-wheel checks them in CI.
    result = check_contents(next(wheel_venv.parent.glob("jobrun-*.whl")))
    assert result.returncode == 0, result.stderr


def test_the_contents_check_names_what_a_wheel_lacks(wheel_venv: Path, tmp_path: Path) -> None:
    wheel = next(wheel_venv.parent.glob("jobrun-*.whl"))
    lacking = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(lacking, "w") as target:
        for item in source.infolist():
            if item.filename not in {"jobrun/web/templates/base.html", "jobrun/py.typed"}:
                target.writestr(item, source.read(item))
        target.writestr("jobrun_tools/__init__.py", "")
    result = check_contents(lacking)
    assert result.returncode != 0
    assert "missing jobrun/py.typed" in result.stderr
    assert "missing jobrun/web/templates/base.html" in result.stderr
    assert "holds jobrun_tools/__init__.py" in result.stderr
