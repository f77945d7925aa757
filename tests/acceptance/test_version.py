"""The version has one source, pyproject.toml: ``jobrun.__version__`` and ``jobrun --version``."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jobrun
from jobrun._version import version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_package_version_is_pyprojects() -> None:
    assert jobrun.__version__ == version() == PYPROJECT_VERSION


def test_jobrun_version_prints_it_and_exits_zero() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "jobrun", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "JOBRUN_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"jobrun {PYPROJECT_VERSION}\n"
    assert result.stderr == ""


def test_a_bare_source_tree_reads_pyproject() -> None:
    # No installed distribution: the version comes from the checkout's pyproject.toml.
    script = (
        "import importlib.metadata as m\n"
        "def missing(name): raise m.PackageNotFoundError(name)\n"
        "m.version = missing\n"
        "import jobrun; print(jobrun.__version__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == PYPROJECT_VERSION
