"""The environment variables of the ``jobrun`` commands: one name, one meaning."""

from __future__ import annotations

from typing import Any

import typer

from jobrun.cli import app

SHARED = {
    # What every command that reaches the database, or a replica of it, connects to.
    "JOBRUN_DATABASE_URL",
    "JOBRUN_READ_URL",
    # The one application of a deployment: the worker runs it, enqueue checks against it.
    "JOBRUN_APP",
    "JOBRUN_LOG_FORMAT",
    "JOBRUN_LOG_LEVEL",
    # Options of the jobs a command makes, whether at once (enqueue) or on a schedule.
    "JOBRUN_PAYLOAD",
    "JOBRUN_PRIORITY",
    "JOBRUN_MAX_ATTEMPTS",
}
"""Variables more than one command reads, each with the same meaning in all of them."""


def _readers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, [*path, name])
            return
        for param in command.params:
            names = param.envvar if isinstance(param.envvar, list | tuple) else [param.envvar]
            for name in filter(None, names):
                found.setdefault(name, []).append(f"jobrun {' '.join(path)} --{param.name}")

    walk(typer.main.get_command(app), [])
    return found


def test_a_variable_read_by_two_commands_means_the_same_in_both() -> None:
    # JOBRUN_TYPE was both the type `schedules add` makes and the filter of
    # `jobs list`: exported for one, it silently narrowed the other's listing.
    readers = _readers()
    assert len(readers) > 30  # the walk reached the commands
    shared = {name: where for name, where in readers.items() if len(where) > 1}
    assert set(shared) <= SHARED, {n: w for n, w in shared.items() if n not in SHARED}
    assert readers["JOBRUN_LIST_TYPE"] == ["jobrun jobs list --job_type"]
    assert readers["JOBRUN_TYPE"] == ["jobrun schedules add --job_type"]
