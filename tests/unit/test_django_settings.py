"""jobrun.integrations.django.config and Django staying optional.

Each case runs in its own interpreter: Django's settings can be configured
once per process, and whether ``django`` was imported is a fact about a
whole process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CONFIGURE = """
import django
from django.conf import settings
settings.configure(
    DATABASES={{"default": {{
        "ENGINE": "django.db.backends.postgresql", "NAME": "shop",
        "USER": "app", "HOST": "db.internal", "PORT": "6432",
    }}}},
    JOBRUN={jobrun},
)
django.setup()
from jobrun.errors import ConfigurationError
from jobrun.integrations.django import config
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    env_free = {"PATH": "/usr/bin:/bin"}  # no JOBRUN_* variable reaches the child
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env_free, capture_output=True, text=True
    )


def test_settings_jobrun_sets_fields_and_the_database_is_django_s_default() -> None:
    done = run(
        CONFIGURE.format(jobrun='{"queues": ["mail"], "concurrency": 3}')
        + "c = config(); print(c.queues, c.concurrency, c.database_url)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['mail']", "3", "postgresql://app@db.internal:6432/shop"]


def test_a_database_url_in_settings_jobrun_wins_over_django_s() -> None:
    done = run(
        CONFIGURE.format(jobrun='{"database_url": "postgresql://jobs@elsewhere/jobs"}')
        + "print(config().database_url)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "postgresql://jobs@elsewhere/jobs"


@pytest.mark.parametrize(
    ("jobrun", "message"),
    [
        ('{"concurency": 3}', "settings.JOBRUN (or a JOBRUN_* variable): invalid configuration: "
         "unknown setting 'concurency'; did you mean 'concurrency'?"),
        ('["queues"]', "settings.JOBRUN must be a dict of jobrun.Config fields, not list"),
    ],
)  # fmt: skip
def test_bad_settings_jobrun_is_one_error_naming_it(jobrun: str, message: str) -> None:
    done = run(
        CONFIGURE.format(jobrun=jobrun)
        + "try:\n    config()\nexcept ConfigurationError as e:\n    print(e)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == message


def test_importing_jobrun_its_cli_and_test_kit_does_not_import_django() -> None:
    code = (
        "import sys, jobrun, jobrun.integrations, jobrun.cli.app, jobrun.testing\n"
        "assert 'django' not in sys.modules, 'django imported'"
    )
    done = run(code)
    assert done.returncode == 0, done.stderr
