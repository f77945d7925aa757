"""Commands on jobs: ``enqueue``, ``jobs list|show|cancel|retry|purge``, ``events``, ``stats``.

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

from jobrun.cli.app import (
    DatabaseUrlOption,
    ReadUrlOption,
    app,
    fail,
    run_with_client,
    run_with_reader,
    run_with_store,
)
from jobrun.cli.durations import format_duration, human_duration
from jobrun.cli.inputs import read_duration, read_job_id, read_json, read_state, validation_exit
from jobrun.cli.rendering import events_table, stdout, when
from jobrun.cli.worker import load_registry
from jobrun.domain import (
    JobFilter,
    JobProgress,
    JobState,
    NewJob,
    QueueDepth,
    QueueStats,
    Unique,
)
from jobrun.errors import JobNotSucceeded, JobrunError, ResultNotReady
from jobrun.postgres.store import Store

__all__ = ["jobs_app"]

jobs_app = typer.Typer(help="List, inspect, cancel, retry and purge jobs.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")


# -- demo -----------------------------------------------------------------------------------


PayloadOption = Annotated[
    str, typer.Option(envvar="JOBRUN_PAYLOAD", show_envvar=True, help="The payload, as JSON.")
]
# Not JOBRUN_QUEUE: that is the worker's list of queues (mail,default), not one to write to.
EnqueueQueueOption = Annotated[
    str | None,
    typer.Option(
        "--queue",
        "-q",
        envvar="JOBRUN_ENQUEUE_QUEUE",
        show_envvar=True,
        help="The queue to put the job in (default: the one declared with the --app "
        "handler, else default).",
    ),
]
PriorityOption = Annotated[
    int | None,
    typer.Option(
        envvar="JOBRUN_PRIORITY",
        show_envvar=True,
        help="Lower runs first (default: declared with the --app handler, else 0).",
    ),
]
DelayOption = Annotated[
    str | None,
    typer.Option(envvar="JOBRUN_DELAY", show_envvar=True, help="Run no sooner than, e.g. 5m."),
]
IdempotencyKeyOption = Annotated[
    str | None,
    typer.Option(
        envvar="JOBRUN_IDEMPOTENCY_KEY",
        show_envvar=True,
        help="Replaying the same key and body returns the stored job.",
    ),
]
UniqueByOption = Annotated[
    list[str] | None,
    typer.Option(
        "--unique-by",
        help="Make the job unique by this payload field (repeat for more): "
        "while a job of the same type and fields holds the key, it is returned instead.",
    ),
]
UniqueUntilOption = Annotated[
    str | None,
    typer.Option(
        "--unique-until",
        help="How long a unique job holds its key: started, finished (default) or purged.",
    ),
]
UniquePeriodOption = Annotated[
    str | None,
    typer.Option("--unique-period", help="One unique job per period of this length, e.g. 1h."),
]
ConcurrencyKeyOption = Annotated[
    str | None,
    typer.Option(
        "--concurrency-key",
        help="Run at most --concurrency-limit jobs of this key at a time, fleet-wide "
        "(e.g. customer:7); the rest wait their turn.",
    ),
]
ConcurrencyLimitOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency-limit",
        help="How many jobs of --concurrency-key may run at once "
        "(default: declared with the --app handler).",
    ),
]
MaxAttemptsOption = Annotated[
    int | None,
    typer.Option(
        envvar="JOBRUN_MAX_ATTEMPTS",
        show_envvar=True,
        help="Attempts before the job ends dead (default: declared with the --app handler, "
        "else 25).",
    ),
]
EnqueueAppOption = Annotated[
    str | None,
    typer.Option(
        "--app",
        envvar="JOBRUN_APP",
        show_envvar=True,
        help="module[:attribute] whose Registry the job must fit: an unknown type "
        "or a payload its handler refuses is an error, and nothing is stored.",
    ),
]


@app.command("enqueue")
def enqueue_command(
    job_type: Annotated[str, typer.Argument(metavar="TYPE", help="The job type.")],
    database_url: DatabaseUrlOption = None,
    payload: PayloadOption = "{}",
    queue: EnqueueQueueOption = None,
    priority: PriorityOption = None,
    delay: DelayOption = None,
    idempotency_key: IdempotencyKeyOption = None,
    max_attempts: MaxAttemptsOption = None,
    app_ref: EnqueueAppOption = None,
    unique_by: UniqueByOption = None,
    unique_until: UniqueUntilOption = None,
    unique_period: UniquePeriodOption = None,
    concurrency_key: ConcurrencyKeyOption = None,
    concurrency_limit: ConcurrencyLimitOption = None,
) -> None:
    """Enqueue one job and print its id (and, on stderr, when it waits for its key's turn)."""
    body_value = read_json("--payload", payload)
    options: dict[str, Any] = {"type": job_type, "payload": body_value}
    # Only the options given are set: the others stay unset, so a Client
    # holding the --app registry fills in the defaults declared with the handler
    # (the idempotency key included, made by the handler's key policy).
    given = {
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
        "idempotency_key": idempotency_key,
        "concurrency_key": concurrency_key,
        "concurrency_limit": concurrency_limit,
    }
    options.update((name, value) for name, value in given.items() if value is not None)
    if delay is not None:
        options["delay"] = read_duration("--delay", delay)
    try:
        if unique_by is not None or unique_until is not None or unique_period is not None:
            period = None
            if unique_period is not None:
                period = read_duration("--unique-period", unique_period)
            options["unique"] = Unique(
                by=tuple(unique_by) if unique_by is not None else None,
                until=unique_until,
                period=period,
            )
        new = NewJob(**options)
    except JobrunError as exc:
        raise fail(str(exc)) from None

    try:
        registry = load_registry(app_ref) if app_ref else None
    except JobrunError as exc:
        raise fail(str(exc)) from None
    # With --app, through a Client holding the registry, as the application enqueues.
    job = run_with_client(
        database_url, lambda client: client.enqueue(new), registry=registry, concurrency=1
    )
    typer.echo(str(job.id))
    if job.id != new.id and job.idempotency_key is not None:
        typer.echo(
            f"replayed existing job (idempotency key {job.idempotency_key!r}, state {job.state})",
            err=True,
        )
    elif job.id != new.id:
        typer.echo(f"a job with the same unique key exists (state {job.state})", err=True)
    elif job.state is JobState.WAITING:
        typer.echo(f"waiting: concurrency key {new.concurrency_key!r} is at its limit", err=True)


# -- demo -----------------------------------------------------------------------------------


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
            "--type", envvar="JOBRUN_TYPE", show_envvar=True, help="Only jobs of this type."
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
) -> None:
    """List jobs, newest first."""
    try:
        flt = JobFilter(
            queue=queue, state=read_state(state) if state else None, type=job_type or None
        )
    except ValidationError as exc:
        raise validation_exit("filter", exc) from None
    after = read_job_id(cursor) if cursor else None
    page = run_with_reader(
        database_url, read_url, lambda store: store.list_jobs(flt, limit=limit, cursor=after)
    )
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
    if page.next_cursor is not None:
        stdout.print(f"more: --cursor {page.next_cursor}")


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
    job = run_with_store(database_url, lambda store: store.cancel(jid))
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
    job = run_with_store(database_url, lambda store: store.retry(jid))
    typer.echo(f"job {job.id} is {job.state.value} again")


@jobs_app.command("run-now")
def jobs_run_now_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Make a queued job that is not due yet (delayed, or waiting for a retry) due now."""
    jid = read_job_id(job_id)
    job = run_with_store(database_url, lambda store: store.run_now(jid))
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
    typer.echo(f"purged {count} job(s) finished more than {format_duration(age)} ago")


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
