"""The public surface: exported names exist and are documented; every error is exported."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import jobrun
import jobrun.cli
import jobrun.domain
import jobrun.errors
import jobrun.ports
import jobrun.postgres
import jobrun.telemetry
import jobrun.testing

PACKAGES = [
    jobrun,
    jobrun.cli,
    jobrun.errors,
    jobrun.domain,
    jobrun.ports,
    jobrun.postgres,
    jobrun.telemetry,
    jobrun.testing,
]


def _modules() -> list[str]:
    """Every module of the jobrun package except the generated query layers."""
    found = ["jobrun"]
    for info in pkgutil.walk_packages(jobrun.__path__, prefix="jobrun."):
        if ".sqlc" not in info.name:
            found.append(info.name)
    return sorted(found)


MODULES = _modules()


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
    # The errors have one home: the domain module no longer re-exports them.
    assert not public_errors & set(jobrun.domain.__all__)


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


# Exceptions a handler raises to steer its job, not errors: outside the tree on purpose.
# Raised to steer, never to report a failure: a handler's Cancel and Snooze, and the
# dashboard's refusal of a request body, which its route turns into a 4xx answer.
CONTROL_FLOW = {
    "jobrun.handler_context.Cancel",
    "jobrun.handler_context.Snooze",
    "jobrun.web.bodies.BadRequest",
    "jobrun.web.bodies.Unconfirmed",  # a BadRequest (409) carrying what to confirm
}


def _jobrun_modules() -> list[ModuleType]:
    found = [jobrun]
    for info in pkgutil.walk_packages(jobrun.__path__, "jobrun."):
        if info.name == "jobrun.__main__":
            continue
        found.append(importlib.import_module(info.name))
    return found


def test_every_exception_class_in_jobrun_is_in_the_one_tree() -> None:
    outside = []
    for module in _jobrun_modules():
        for name, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseException)):
                continue
            if value.__module__ != module.__name__ or name.startswith("_"):
                continue  # imported from elsewhere, or private
            qualified = f"{module.__name__}.{name}"
            if qualified in CONTROL_FLOW:
                continue
            if not issubclass(value, jobrun.errors.JobrunError):
                outside.append(qualified)
            elif module is not jobrun.errors:
                outside.append(f"{qualified} (defined outside jobrun.errors)")
    assert not outside, f"exceptions outside the tree: {outside}"


def test_the_tree_docstring_names_every_error() -> None:
    doc = jobrun.errors.__doc__ or ""
    missing = [name for name in jobrun.errors.__all__ if name not in doc]
    assert not missing, f"errors missing from the tree in jobrun.errors' docstring: {missing}"


def test_every_advisory_lock_key_is_distinct() -> None:
    # Two leader-elected services sharing a key would starve one of them: in one
    # worker the maintenance service held the queue-stats key, so the queue
    # gauges were never published.
    import jobrun.maintenance
    import jobrun.scheduler
    import jobrun.telemetry.prometheus

    # jobrun.postgres re-exports the migrate *function* under the module's name.
    migrate_module = importlib.import_module("jobrun.postgres.migrate")
    keys = {
        "migrate": migrate_module.MIGRATION_LOCK_KEY,
        "scheduler": jobrun.scheduler.SCHEDULER_LOCK_KEY,
        "maintenance": jobrun.maintenance.MAINTENANCE_LOCK_KEY,
        "queue stats": jobrun.telemetry.prometheus.QUEUE_STATS_LOCK_KEY,
    }
    assert len(set(keys.values())) == len(keys), keys


def test_every_leader_run_service_takes_its_key_from_the_one_table() -> None:
    # The leader-run services declare their keys in one place; a service whose
    # default drifted from the table would compete for a key nobody checks.
    import inspect

    import jobrun.leadership
    import jobrun.maintenance
    import jobrun.scheduler
    import jobrun.telemetry.prometheus

    table = dict(jobrun.leadership.LEADER_LOCK_KEYS)
    migrate_module = importlib.import_module("jobrun.postgres.migrate")
    assert len(set(table.values()) | {migrate_module.MIGRATION_LOCK_KEY}) == len(table) + 1
    defaults = {
        "scheduler": jobrun.scheduler.Scheduler,
        "maintenance": jobrun.maintenance.Maintenance,
        "queue stats": jobrun.telemetry.prometheus.QueueStatsPublisher,
    }
    assert set(defaults) == set(table)
    for name, service in defaults.items():
        assert inspect.signature(service).parameters["key"].default == table[name], name
