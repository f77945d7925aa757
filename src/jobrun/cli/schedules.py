"""``jobrun schedules add|list|edit|run-now|pause|resume|remove``: manage schedules.

A schedule enqueues a job on a cron expression (in an IANA time zone) or at a
fixed interval; the leader-elected scheduler (``jobrun worker --scheduler``)
fires them. These commands only change the stored schedules; ``list`` shows
where each comes from (``manual``, or ``code`` for periodic jobs declared with
their handlers, which the leader writes: see :mod:`jobrun.periodic`; those are
edited in code, not here). ``add`` and ``edit`` read their options with
:mod:`jobrun.schedule_input`, as the dashboard reads its forms.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from jobrun.cli.app import DatabaseUrlOption, app, cli_actor, fail, run_with_store
from jobrun.cli.rendering import stdout, trigger, when
from jobrun.domain import Schedule
from jobrun.errors import JobrunError
from jobrun.schedule_input import new_schedule, schedule_patch

__all__ = ["schedules_app"]

schedules_app = typer.Typer(
    help="Create and manage cron and interval schedules.", no_args_is_help=True
)
app.add_typer(schedules_app, name="schedules")


@schedules_app.command("add")
def schedules_add_command(
    name: Annotated[str, typer.Argument(help="A unique schedule name.")],
    job_type: Annotated[
        str, typer.Option("--type", envvar="JOBRUN_TYPE", show_envvar=True, help="Job type.")
    ],
    database_url: DatabaseUrlOption = None,
    cron: Annotated[
        str | None,
        typer.Option(envvar="JOBRUN_CRON", show_envvar=True, help="Cron expression."),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(envvar="JOBRUN_EVERY", show_envvar=True, help="Fixed interval, e.g. 5m."),
    ] = None,
    payload: Annotated[
        str, typer.Option(envvar="JOBRUN_PAYLOAD", show_envvar=True, help="Payload, as JSON.")
    ] = "{}",
    queue: Annotated[
        str,
        typer.Option(
            "--queue",
            "-q",
            envvar="JOBRUN_SCHEDULE_QUEUE",
            show_envvar=True,
            help="The queue its jobs go to.",
        ),
    ] = "default",
    timezone: Annotated[
        str, typer.Option(envvar="JOBRUN_TIMEZONE", show_envvar=True, help="IANA zone for cron.")
    ] = "UTC",
    priority: Annotated[
        int,
        typer.Option(
            envvar="JOBRUN_PRIORITY",
            show_envvar=True,
            help="Its jobs' priority (lower runs first).",
        ),
    ] = 0,
    max_attempts: Annotated[
        int | None,
        typer.Option(
            envvar="JOBRUN_MAX_ATTEMPTS",
            show_envvar=True,
            help="Its jobs' attempts before they end dead (default 25).",
        ),
    ] = None,
) -> None:
    """Create a schedule that enqueues a job on a cron expression or a fixed interval."""
    options = {
        "name": name,
        "type": job_type,
        "payload": payload,
        "queue": queue,
        "timezone": timezone,
        "priority": priority,
        "max_attempts": max_attempts,
        "cron": cron,
        "every": every,
    }
    try:
        new = new_schedule(options, spell=_option)
    except JobrunError as exc:
        raise fail(str(exc)) from None
    created = run_with_store(database_url, lambda store: store.create_schedule(new))
    typer.echo(
        f"schedule {created.name!r} created ({trigger(created)}); "
        f"next run {when(created.next_run_at)} UTC"
    )


def _option(field: str) -> str:
    """How the command line spells a schedule field: its option, or NAME, the argument."""
    return "NAME" if field == "name" else "--" + field.replace("_", "-")


@schedules_app.command("list")
def schedules_list_command(database_url: DatabaseUrlOption = None) -> None:
    """List every schedule."""
    schedules = run_with_store(database_url, lambda store: store.list_schedules())
    table = Table(title=f"schedules ({len(schedules)})")
    table.add_column("name")
    table.add_column("type")
    table.add_column("queue")
    table.add_column("trigger")
    table.add_column("zone")
    table.add_column("next run (UTC)", no_wrap=True)
    table.add_column("last run (UTC)", no_wrap=True)
    table.add_column("status")
    table.add_column("origin")
    for s in schedules:
        table.add_row(
            s.name,
            s.type,
            s.queue,
            trigger(s),
            s.timezone,
            when(s.next_run_at),
            when(s.last_run_at),
            _status(s),
            s.origin if s.declared_group is None else f"code ({s.declared_group})",
        )
    stdout.print(table)


def _status(schedule: Schedule) -> str:
    if schedule.removed_from_code_at is not None:
        return "paused (removed from code)" if schedule.paused else "active (removed from code)"
    return "paused" if schedule.paused else "active"


@schedules_app.command("pause")
def schedules_pause_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Stop a schedule from firing until it is resumed."""
    schedule = run_with_store(
        database_url, lambda store: store.pause_schedule(name, actor=cli_actor())
    )
    typer.echo(f"schedule {schedule.name!r} paused")


@schedules_app.command("resume")
def schedules_resume_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Let a paused schedule fire again, from now on."""
    schedule = run_with_store(
        database_url, lambda store: store.resume_schedule(name, actor=cli_actor())
    )
    typer.echo(f"schedule {schedule.name!r} resumed; next run {when(schedule.next_run_at)} UTC")


@schedules_app.command("remove")
def schedules_remove_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Delete a schedule; jobs it already enqueued are kept."""
    run_with_store(database_url, lambda store: store.delete_schedule(name))
    typer.echo(f"schedule {name!r} removed")


@schedules_app.command("edit")
def schedules_edit_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
    job_type: Annotated[str | None, typer.Option("--type", help="New job type.")] = None,
    cron: Annotated[
        str | None, typer.Option(help="New cron expression (replaces an interval).")
    ] = None,
    every: Annotated[
        str | None, typer.Option(help="New fixed interval, e.g. 5m (replaces a cron).")
    ] = None,
    payload: Annotated[str | None, typer.Option(help="New payload, as JSON.")] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", "-q", help="New queue for its jobs.")
    ] = None,
    timezone: Annotated[str | None, typer.Option(help="New IANA zone for cron.")] = None,
    priority: Annotated[int | None, typer.Option(help="New priority of its jobs.")] = None,
    max_attempts: Annotated[
        int | None, typer.Option(help="New attempts of its jobs before they end dead.")
    ] = None,
) -> None:
    """Change a schedule; a new cron, interval or zone recomputes its next run.

    Options not given stay as they are. A schedule declared in code is
    refused: change its declaration, which the next deploy writes anyway.
    """
    options = {
        "type": job_type,
        "cron": cron,
        "every": every,
        "payload": payload,
        "queue": queue,
        "timezone": timezone,
        "priority": priority,
        "max_attempts": max_attempts,
    }
    try:
        patch = schedule_patch(options, spell=_option)
    except JobrunError as exc:
        raise fail(str(exc)) from None
    changed = run_with_store(
        database_url, lambda store: store.update_schedule(name, patch, actor=cli_actor())
    )
    typer.echo(
        f"schedule {changed.name!r} changed ({trigger(changed)}); "
        f"next run {when(changed.next_run_at)} UTC"
    )


@schedules_app.command("run-now")
def schedules_run_now_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Enqueue one job of a schedule now; its regular next run stays as it was."""
    job = run_with_store(
        database_url, lambda store: store.run_schedule_now(name, actor=cli_actor())
    )
    typer.echo(f"schedule {name!r} ran now: job {job.id} queued in {job.queue!r}")
