"""``jobrun demo``: the command that runs the self-contained demo.

The demo itself (workers, retries, dead jobs, a cancel, a schedule) lives in
:mod:`jobrun.demo`; this module only exposes it as a command, maps
:class:`~jobrun.errors.JobrunError` to exit 2 and a failed check to exit 1.
"""

from __future__ import annotations

from typing import Annotated

import typer

from jobrun import loop as jobrun_loop
from jobrun.cli.app import DatabaseUrlOption, app, fail
from jobrun.cli.rendering import stdout
from jobrun.errors import JobrunError

__all__ = ["demo_command"]


@app.command("demo")
def demo_command(
    database_url: DatabaseUrlOption = None,
    jobs: Annotated[
        int,
        typer.Option(envvar="JOBRUN_DEMO_JOBS", show_envvar=True, min=10, help="Jobs to enqueue."),
    ] = 200,
    workers: Annotated[
        int,
        typer.Option(envvar="JOBRUN_DEMO_WORKERS", show_envvar=True, min=1, help="Workers to run."),
    ] = 3,
) -> None:
    """Run a self-contained demo: workers, retries, dead jobs, a cancel, a schedule."""
    from jobrun.demo import run_demo

    try:
        ok = jobrun_loop.run(run_demo(database_url, jobs=jobs, workers=workers, console=stdout))
    except JobrunError as exc:
        raise fail(str(exc)) from None
    if not ok:
        raise typer.Exit(1)
