"""Commands on jobs: ``jobs list|result|show|cancel|retry|run-now|purge``, ``events``, ``stats``.

Each command checks its input first (:mod:`jobrun.cli.inputs`), then makes one
or two :class:`~jobrun.postgres.store.Store` calls through
:func:`~jobrun.cli.app.run_with_store` and prints the result
(:mod:`jobrun.cli.rendering`).
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from uuid import UUID

import typer
from pydantic import ValidationError
from rich.table import Table

from jobrun._endings import plural
from jobrun.cli.app import (
    DatabaseUrlOption,
    ReadUrlOption,
    app,
    cli_actor,
    fail,
    run_with_client,
    run_with_reader,
    run_with_store,
)
from jobrun.cli.durations import format_duration, human_duration
from jobrun.cli.inputs import read_duration, read_job_id, read_state, validation_exit
from jobrun.cli.rendering import events_table, stdout, when
from jobrun.domain import (
    SEARCH_ROWS,
    JobFilter,
    JobPage,
    JobProgress,
    JobState,
    QueueDepth,
    QueueStats,
    error_search,
    payload_search,
    split_id_search,
)
from jobrun.errors import JobNotSucceeded, ResultNotReady
from jobrun.postgres.store import Store

__all__ = ["jobs_app"]

jobs_app = typer.Typer(help="List, inspect, cancel, retry and purge jobs.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")


SearchRowsOption = Annotated[
    int,
    typer.Option(
        envvar="JOBRUN_SEARCH_ROWS",
        show_envvar=True,
        min=1,
        help="A search examines at most this many jobs, newest first, then says where it stopped.",
    ),
]
"""``jobs list --search-rows``: how far one search call reads."""


@jobs_app.command("list")
def jobs_list_command(
    database_url: DatabaseUrlOption = None,
    read_url: ReadUrlOption = None,
    queue: Annotated[
        str | None,
        typer.Option(
            "--queue",
            "-q",
            envvar="JOBRUN_LIST_QUEUE",
            show_envvar=True,
            help="Only jobs of this queue.",
        ),
    ] = None,
    state: Annotated[
        str | None,
        typer.Option(
            envvar="JOBRUN_STATE",
            show_envvar=True,
            help="queued, leased, succeeded, cancelled or dead.",
        ),
    ] = None,
    job_type: Annotated[
        str | None,
        typer.Option(
            "--type", envvar="JOBRUN_LIST_TYPE", show_envvar=True, help="Only jobs of this type."
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option(envvar="JOBRUN_LIMIT", show_envvar=True, min=1, help="Most jobs per page."),
    ] = 50,
    cursor: Annotated[
        str | None,
        typer.Option(envvar="JOBRUN_CURSOR", show_envvar=True, help="Next-page cursor."),
    ] = None,
    job_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            envvar="JOBRUN_LIST_ID",
            show_envvar=True,
            help="Search by id: its first hex digits (0193ab), or its last after ... "
            "(...9f2c); dashes and case do not matter.",
        ),
    ] = None,
    error: Annotated[
        str | None,
        typer.Option(
            envvar="JOBRUN_LIST_ERROR",
            show_envvar=True,
            help="Search for this text in the last error (any case, taken literally).",
        ),
    ] = None,
    payload: Annotated[
        str | None,
        typer.Option(
            envvar="JOBRUN_LIST_PAYLOAD",
            show_envvar=True,
            help="Search for payloads containing this JSON, e.g. '{\"customer\": 42}'.",
        ),
    ] = None,
    search_rows: SearchRowsOption = SEARCH_ROWS,
) -> None:
    """List jobs, newest first, or search them (--id, --error, --payload).

    A search examines at most --search-rows jobs per call; when it stops there
    it prints how to search further (a --cursor).
    """
    flt = _list_filter(queue, state, job_type, job_id, error, payload)
    after = read_job_id(cursor) if cursor else None
    page = run_with_reader(
        database_url,
        read_url,
        lambda store: store.list_jobs(flt, limit=limit, cursor=after, search_rows=search_rows),
    )
    _print_page(page, search_rows)


def _print_page(page: JobPage, search_rows: int) -> None:
    """One page of ``jobs list`` as a table, then how to read the next one."""
    table = Table(title=f"jobs ({len(page.jobs)})")
    # The whole id, however narrow the terminal: a UUIDv7's leading characters
    # are its timestamp, so any cut of it names many jobs at once.
    table.add_column("id", no_wrap=True, min_width=len(str(UUID(int=0))))
    table.add_column("type")
    table.add_column("queue")
    table.add_column("state")
    table.add_column("attempts", justify="right")
    table.add_column("priority", justify="right")
    table.add_column("run at (UTC)", no_wrap=True)
    table.add_column("created (UTC)", no_wrap=True)
    for job in page.jobs:
        table.add_row(
            str(job.id),
            job.type,
            job.queue,
            job.state.value + (" (cancel requested)" if job.cancel_requested else ""),
            f"{job.attempts}/{job.max_attempts}",
            str(job.priority),
            when(job.run_at),
            when(job.created_at),
        )
    stdout.print(table)
    if page.scan_cut:
        stdout.print(
            f"searched {search_rows:,} jobs and stopped there; search further: "
            f"--cursor {page.next_cursor}"
        )
    elif page.next_cursor is not None:
        stdout.print(f"more: --cursor {page.next_cursor}")


def _list_filter(
    queue: str | None,
    state: str | None,
    job_type: str | None,
    job_id: str | None,
    error: str | None,
    payload: str | None,
) -> JobFilter:
    """The filter of ``jobs list``, or exit 2 naming the option that is wrong."""
    try:
        prefix, suffix = split_id_search(job_id or "")
    except ValueError as exc:
        raise fail(f"--id: {exc}") from None
    for option, check, text in (
        ("--payload", payload_search, payload),
        ("--error", error_search, error),
    ):
        if text is not None:
            try:
                check(text)
            except ValueError as exc:
                raise fail(f"{option}: {exc}") from None
    try:
        return JobFilter(
            queue=queue,
            state=read_state(state) if state else None,
            type=job_type or None,
            id_prefix=prefix,
            id_suffix=suffix,
            error=error or None,
            payload=payload,
        )
    except ValidationError as exc:
        raise validation_exit("filter", exc) from None


@jobs_app.command("result")
def jobs_result_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
    wait: Annotated[
        str | None,
        typer.Option(help="Wait up to this long for the job to finish, e.g. 30s."),
    ] = None,
) -> None:
    """Print what a job's handler returned, as JSON (null: nothing).

    Exits 1 when the job ended dead or cancelled, 3 when it had not finished
    (in time, with --wait), 2 for an unknown job or bad input.
    """
    jid = read_job_id(job_id)
    seconds = read_duration("--wait", wait) if wait is not None else None

    async def body(client: Any) -> tuple[int, Any]:
        try:
            return 0, await client.result(jid, wait=seconds)
        except JobNotSucceeded as exc:
            return 1, exc
        except ResultNotReady as exc:
            return 3, exc

    code, value = run_with_client(database_url, body, concurrency=1)
    if code:
        typer.echo(f"error: {' '.join(str(value).split())}", err=True)
        raise typer.Exit(code)
    typer.echo(json.dumps(value, ensure_ascii=False))


@jobs_app.command("show")
def jobs_show_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
    read_url: ReadUrlOption = None,
) -> None:
    """Show one job's fields and its event history."""
    jid = read_job_id(job_id)

    async def body(store: Store) -> tuple[Any, list[Any], dict[UUID, JobProgress], Any]:
        job = await store.get(jid)
        result = None
        if job.state is JobState.SUCCEEDED:
            result = (await store.result_of(jid)).value
        deps = await store.dependencies_of(jid)
        return job, await store.events(jid), await store.progress_of([jid]), (result, deps)

    job, events, progress, (result, deps) = run_with_reader(database_url, read_url, body)
    fields = Table(title=f"job {job.id}", show_header=False)
    fields.add_column("field", style="bold")
    fields.add_column("value")
    rows: list[tuple[str, str]] = [
        ("id", str(job.id)),
        ("type", job.type),
        ("queue", job.queue),
        ("state", job.state.value),
        ("progress", progress[job.id].describe() if job.id in progress else ""),
        ("cancel requested", "yes" if job.cancel_requested else "no"),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("priority", str(job.priority)),
        (
            "backoff",
            f"{job.backoff.kind.value}, base {format_duration(job.backoff.base)}, "
            f"max {format_duration(job.backoff.max)}",
        ),
        ("payload", json.dumps(job.payload)),
        ("result", "" if result is None else json.dumps(result, ensure_ascii=False)),
        (
            "depends on",
            ", ".join(f"{d.job_id} ({d.state.value if d.state else 'purged'})" for d in deps),
        ),
        ("idempotency key", job.idempotency_key or ""),
        ("run at", when(job.run_at)),
        ("lease owner", job.lease_owner or ""),
        ("lease expires", when(job.lease_expires_at)),
        ("created", when(job.created_at)),
        ("updated", when(job.updated_at)),
        ("finished", when(job.finished_at)),
        ("last error", (job.last_error or "").strip()),
    ]
    for name, value in rows:
        fields.add_row(name, value)
    stdout.print(fields)
    stdout.print(events_table(events, "events"))


@jobs_app.command("cancel")
def jobs_cancel_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Cancel a queued job, or ask the worker running it to stop."""
    jid = read_job_id(job_id)
    job = run_with_store(database_url, lambda store: store.cancel(jid, actor=cli_actor()))
    if job.state is JobState.CANCELLED:
        typer.echo(f"job {job.id} cancelled")
    else:
        typer.echo(f"job {job.id} is {job.state.value}: cancel requested")


@jobs_app.command("retry")
def jobs_retry_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Put a dead or cancelled job back in its queue, due now."""
    jid = read_job_id(job_id)
    job = run_with_store(database_url, lambda store: store.retry(jid, actor=cli_actor()))
    typer.echo(f"job {job.id} is {job.state.value} again")


@jobs_app.command("run-now")
def jobs_run_now_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Make a queued job that is not due yet (delayed, or waiting for a retry) due now."""
    jid = read_job_id(job_id)
    job = run_with_store(database_url, lambda store: store.run_now(jid, actor=cli_actor()))
    typer.echo(f"job {job.id} is due now")


@jobs_app.command("purge")
def jobs_purge_command(
    older_than: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_OLDER_THAN",
            show_envvar=True,
            help="Delete finished jobs older than this, e.g. 7d.",
        ),
    ],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Delete finished jobs (with their events) older than a duration."""
    age = read_duration("--older-than", older_than)
    count = run_with_store(database_url, lambda store: store.purge(age))
    typer.echo(f"purged {plural(count, 'job')} finished more than {format_duration(age)} ago")


# -- demo -----------------------------------------------------------------------------------


@app.command("events")
def events_command(
    job_id: Annotated[str, typer.Argument(metavar="JOB_ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
    read_url: ReadUrlOption = None,
) -> None:
    """Show the recorded transitions of one job, oldest first."""
    jid = read_job_id(job_id)

    async def body(store: Store) -> list[Any]:
        await store.get(jid)  # a clear error for an unknown id, not an empty table
        return await store.events(jid)

    events = run_with_reader(database_url, read_url, body)
    stdout.print(events_table(events, f"events of job {jid}"))


# -- demo -----------------------------------------------------------------------------------


@app.command("stats")
def stats_command(database_url: DatabaseUrlOption = None, read_url: ReadUrlOption = None) -> None:
    """Per queue: jobs waiting, due now and running, the lag of the oldest due job, and totals.

    Lag is measured from each job's run_at, so a job delayed to later is not
    late. The totals count every job the table still keeps in each finished
    state (succeeded, dead, cancelled), so a drained queue still shows what
    became of its jobs until retention prunes them.
    """

    async def body(store: Store) -> tuple[list[QueueStats], list[QueueDepth]]:
        return await store.queue_stats(), await store.depth()

    stats, depth = run_with_reader(database_url, read_url, body)
    live = {row.queue: row for row in stats}
    totals: dict[str, dict[JobState, int]] = {}
    for row in depth:
        totals.setdefault(row.queue, {})[row.state] = row.count
    table = Table(title="queues")
    table.add_column("queue")
    for column in ("queued", "due", "leased", "succeeded", "dead", "cancelled", "lag"):
        table.add_column(column, justify="right")
    for queue in sorted(live.keys() | totals.keys()):
        now, counts = live.get(queue), totals.get(queue, {})
        table.add_row(
            queue,
            str(now.queued if now else counts.get(JobState.QUEUED, 0)),
            str(now.due if now else 0),
            str(now.leased if now else counts.get(JobState.LEASED, 0)),
            *(str(counts.get(state, 0)) for state in _FINISHED),
            human_duration(now.lag) if now and now.due else "-",
        )
    stdout.print(table)


_FINISHED = (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED)
