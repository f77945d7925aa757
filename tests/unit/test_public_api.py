"""The public surface: exported names exist and are documented; every error is exported."""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

import pytest

import jobrun
import jobrun.errors
import jobrun.job
import jobrun.postgres
import jobrun.testing

PACKAGES = [jobrun, jobrun.errors, jobrun.job, jobrun.postgres, jobrun.testing]
MODULES = [
    "jobrun",
    "jobrun.cli",
    "jobrun.cron",
    "jobrun.demo",
    "jobrun.errors",
    "jobrun.job",
    "jobrun.loop",
    "jobrun.reaper",
    "jobrun.registry",
    "jobrun.scheduler",
    "jobrun.worker",
    "jobrun.postgres",
    "jobrun.postgres.convert",
    "jobrun.postgres.demo_support",
    "jobrun.postgres.embedded",
    "jobrun.postgres.lock",
    "jobrun.postgres.migrate",
    "jobrun.postgres.notify",
    "jobrun.postgres.pool",
    "jobrun.postgres.schedules",
    "jobrun.postgres.schedules_sync",
    "jobrun.postgres.store",
    "jobrun.postgres.store_sync",
    "jobrun.postgres.sync_producer",
    "jobrun.postgres.testdb",
    "jobrun.testing",
    "jobrun.testing.factory",
    "jobrun.testing.pytest_plugin",
    "jobrun.testing.recording",
    "jobrun.testing.run",
]


@pytest.mark.parametrize("module", PACKAGES, ids=lambda m: m.__name__)
def test_all_is_unique_and_resolvable(module: ModuleType) -> None:
    names = list(module.__all__)
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(module, name), f"{module.__name__}.__all__ names missing {name}"


def test_every_error_is_exported_from_the_package() -> None:
    public_errors = {
        name
        for name, value in vars(jobrun.errors).items()
        if inspect.isclass(value) and issubclass(value, jobrun.errors.JobrunError)
    }
    assert public_errors == set(jobrun.errors.__all__)
    assert public_errors <= set(jobrun.__all__)
    assert public_errors <= set(jobrun.job.__all__)


def test_every_error_descends_from_the_one_root() -> None:
    for name in jobrun.errors.__all__:
        assert issubclass(getattr(jobrun.errors, name), jobrun.errors.JobrunError)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_says_why_it_exists(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__doc__ and len(module.__doc__.strip()) > 40, f"{name} has no docstring"


@pytest.mark.parametrize("module", PACKAGES, ids=lambda m: m.__name__)
def test_every_exported_class_and_function_is_documented(module: ModuleType) -> None:
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{module.__name__}.{name} has no docstring"
