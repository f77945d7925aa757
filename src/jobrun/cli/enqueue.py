"""``jobrun enqueue``: put one job in a queue from the command line.

With ``--app`` the job goes through a :class:`~jobrun.Client` holding that
application's :class:`~jobrun.Registry`, as the application itself would
enqueue it: the handler's declared defaults fill in the options not given, and
an unknown type or a payload the handler refuses is an error that stores
nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from jobrun.cli.app import DatabaseUrlOption, app, fail, run_with_client
from jobrun.cli.inputs import read_duration, read_json
from jobrun.cli.worker import load_registry
from jobrun.domain import JobState, NewJob, Unique
from jobrun.errors import JobrunError

__all__ = ["enqueue_command"]


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
