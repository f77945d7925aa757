"""The PgBouncer settings: validated once, read from the environment, never printing a password.

(The behaviour through a real bouncer is in tests/integration/test_pgbouncer.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobrun.config import Config
from jobrun.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-pw"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("JOBRUN_DATABASE_URL", "JOBRUN_DIRECT_URL", "JOBRUN_PGBOUNCER", "JOBRUN_LISTEN"):
        monkeypatch.delenv(name, raising=False)


def test_pgbouncer_without_a_database_url_is_refused_naming_both() -> None:
    with pytest.raises(ConfigurationError, match="pgbouncer needs database_url"):
        Config(pgbouncer=True)


def test_settings_come_from_the_environment_and_stay_out_of_repr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBRUN_DATABASE_URL", f"postgresql://app:{SECRET}@bouncer:6432/app")
    monkeypatch.setenv("JOBRUN_DIRECT_URL", f"postgresql://app:{SECRET}@db:5432/app")
    monkeypatch.setenv("JOBRUN_PGBOUNCER", "true")
    monkeypatch.setenv("JOBRUN_LISTEN", "false")
    config = Config()
    assert config.pgbouncer is True
    assert config.listen is False
    assert config.direct_url == f"postgresql://app:{SECRET}@db:5432/app"
    assert SECRET not in repr(config)
    assert SECRET not in str(config)


def test_defaults_change_nothing_without_pgbouncer() -> None:
    config = Config()
    assert (config.pgbouncer, config.direct_url, config.listen) == (False, None, True)


def _worker(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("JOBRUN_") or k == "JOBRUN_EMBEDDED_DIR"
    }
    return subprocess.run(
        [sys.executable, "-m", "jobrun", "worker", "--app", "tests.acceptance.cli_worker_app",
         *args],
        cwd=ROOT, capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip


def test_cli_worker_pgbouncer_without_a_database_url_fails_in_one_line() -> None:
    result = _worker("--pgbouncer")
    assert result.returncode == 2
    assert result.stderr.startswith("error: ")
    assert "pgbouncer needs database_url" in result.stderr


def test_cli_worker_never_prints_the_direct_or_pooled_password() -> None:
    # Port 1 on the loopback refuses at once: the error names host, port and
    # database, and neither URL's password.
    result = _worker(
        "--pgbouncer",
        "--database-url", f"postgresql://app:{SECRET}@127.0.0.1:1/app",
        "--direct-url", f"postgresql://app:{SECRET}@127.0.0.1:1/app",
    )  # fmt: skip
    assert result.returncode == 2
    assert "127.0.0.1:1" in result.stderr, result.stderr
    assert SECRET not in result.stderr + result.stdout
