"""The ``jobrun`` command: run workers, enqueue jobs and operate a jobrun database.

Every command that needs the database takes ``--database-url`` (or reads
``JOBRUN_DATABASE_URL``; with neither it uses the embedded server) and runs its
async body through :func:`run_with_pool`, which opens the pool, closes it, and
turns any :class:`~jobrun.errors.JobrunError` into one ``error: ...`` line on
stderr and exit code 2, without a traceback. Input is checked *before* the
database is touched (JSON, durations, states, job ids), so a bad argument
writes nothing. Every option also reads a ``JOBRUN_*`` environment variable
(shown by ``--help``).

Commands: ``migrate [status]``, ``worker``, ``enqueue``, ``jobs list|show|
cancel|retry|purge``, ``events``, ``schedules add|list|pause|resume|remove``,
``stats`` and ``demo``.

The CLI talks to the database only through :mod:`jobrun.postgres`; it never
imports psycopg or the generated query layer (an import-linter contract).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar
from uuid import UUID

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from jobrun import loop as jobrun_loop
from jobrun.errors import DurationError, JobrunError
from jobrun.job import (
    MAX_DELAY,
    MAX_PAYLOAD_DEPTH,
    EventMode,
    JobFilter,
    JobState,
    NewJob,
    NewSchedule,
    Schedule,
)
from jobrun.postgres import (
    Pool,
    migrate,
    migration_status,
    open_pool,
    resolve_database_url,
)
from jobrun.postgres.store import Store
from jobrun.registry import Registry

__all__ = [
    "EXIT_JOBRUN_ERROR",
    "DatabaseUrlOption",
    "DurationError",
    "app",
    "format_duration",
    "load_registry",
    "main",
    "parse_duration",
    "run_with_pool",
    "run_with_store",
]

EXIT_JOBRUN_ERROR = 2
"""Exit code of a command that failed with a JobrunError (bad input, database down, ...)."""

T = TypeVar("T")

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        envvar="JOBRUN_DATABASE_URL",
        show_envvar=True,
        help="PostgreSQL URL. Without one, jobrun uses its embedded server.",
    ),
]
"""The ``--database-url`` option every database command takes; reuse it in new commands."""

app = typer.Typer(
    name="jobrun",
    help="Operate jobrun: a durable job queue on PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
migrate_app = typer.Typer(help="Apply or inspect the database schema migrations.")
app.add_typer(migrate_app, name="migrate")
jobs_app = typer.Typer(help="List, inspect, cancel, retry and purge jobs.", no_args_is_help=True)
app.add_typer(jobs_app, name="jobs")
schedules_app = typer.Typer(
    help="Create and manage cron and interval schedules.", no_args_is_help=True
)
app.add_typer(schedules_app, name="schedules")


def _console() -> Console:
    # Piped output has no terminal width; don't squeeze job ids into 80 columns.
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        return Console(width=200)
    return Console()


stdout = _console()


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; return the Exit to raise (code 2)."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_JOBRUN_ERROR)


def run_with_pool(
    database_url: str | None,
    body: Callable[[Pool], Awaitable[T]],
    *,
    worker_concurrency: int = 1,
) -> T:
    """Run ``body`` with an open pool on the chosen database; map JobrunError to exit 2.

    The URL is resolved by :func:`jobrun.postgres.resolve_database_url` (explicit,
    then ``JOBRUN_DATABASE_URL``, then the embedded server); the pool is always
    closed before returning.
    """

    async def run() -> T:
        pool = await open_pool(
            resolve_database_url(database_url), worker_concurrency=worker_concurrency
        )
        try:
            return await body(pool)
        finally:
            await pool.close()

    try:
        return jobrun_loop.run(run())
    except JobrunError as exc:
        raise fail(str(exc)) from None


def run_with_store(database_url: str | None, body: Callable[[Store], Awaitable[T]]) -> T:
    """Like :func:`run_with_pool`, handing ``body`` a :class:`Store` on the pool."""

    async def with_store(pool: Pool) -> T:
        return await body(Store(pool))

    return run_with_pool(database_url, with_store)


# -- input parsing --------------------------------------------------------------------------


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}
_MAX_SECONDS = MAX_DELAY.total_seconds()


def parse_duration(text: str) -> timedelta:
    """Read ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``, ``250ms``, ``1.5h`` into a timedelta.

    Units: ``ms``, ``s``, ``m``, ``h``, ``d``, ``w``; parts add up, each unit at
    most once, and the whole is at most :data:`jobrun.job.MAX_DELAY` (100
    years). A bare number, an unknown unit, a negative, empty or longer value
    raises :class:`DurationError` with a message fit for the user.
    """
    value = text.strip().lower()
    hint = "use a number and a unit, like 30s, 5m, 2h, 1d or 1h30m"
    too_long = f"duration {text!r} is too long: it must be at most 100 years (36525d)"
    if not value:
        raise DurationError(f"empty duration: {hint}")
    total = timedelta(0)
    seen: set[str] = set()
    pos = 0
    for match in _DURATION_PART.finditer(value):
        if match.start() != pos:
            break
        unit = match.group(2)
        if unit in seen:
            raise DurationError(f"invalid duration {text!r}: unit {unit!r} given twice")
        seen.add(unit)
        amount = float(match.group(1))
        # Checked as a float first: timedelta overflows (or meets infinity) long before.
        if amount * _UNITS[unit].total_seconds() > _MAX_SECONDS:
            raise DurationError(too_long)
        total += _UNITS[unit] * amount
        pos = match.end()
    if pos != len(value) or not seen:
        raise DurationError(f"invalid duration {text!r}: {hint}")
    if total > MAX_DELAY:
        raise DurationError(too_long)
    return total


def format_duration(value: timedelta) -> str:
    """A short human text for ``value``: ``1h30m``, ``3s``, ``250ms``."""
    micros = value // timedelta(microseconds=1)
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    if micros < 1_000_000:
        return f"{sign}{micros / 1000:g}ms"
    seconds, rest = divmod(micros, 1_000_000)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    if seconds or rest:
        parts.append(f"{seconds + rest / 1_000_000:g}s")
    return sign + "".join(parts)


def _duration(option: str, text: str) -> timedelta:
    try:
        return parse_duration(text)
    except DurationError as exc:
        raise fail(f"{option}: {exc}") from None


def _json(option: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{option} is not valid JSON: {exc}") from None
    except RecursionError:
        # The parser recurses per level; a payload this deep is refused anyway.
        raise fail(
            f"{option}: payload is nested more than {MAX_PAYLOAD_DEPTH} levels deep"
        ) from None


def _job_id(text: str) -> UUID:
    try:
        return UUID(text.strip())
    except ValueError:
        raise fail(f"{text!r} is not a job id (a UUID)") from None


def _state(text: str) -> JobState:
    try:
        return JobState(text.strip().lower())
    except ValueError:
        choices = ", ".join(s.value for s in JobState)
        raise fail(f"unknown state {text!r}; choose one of: {choices}") from None


def _validation(what: str, exc: ValidationError) -> typer.Exit:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return fail(f"invalid {what}: {'; '.join(parts)}")


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


def load_registry(ref: str) -> Registry:
    """Import ``module[:attr]`` and return its :class:`Registry` (attr defaults to ``registry``).

    The current directory is importable, as with ``python -m``. Raises
    :class:`~jobrun.errors.ConfigurationError` when the module or the attribute
    is missing or is not a Registry.
    """
    from jobrun.errors import ConfigurationError

    module_name, _, attr = ref.partition(":")
    attr = attr or "registry"
    if not module_name:
        raise ConfigurationError(f"--app {ref!r}: expected module[:attribute]")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigurationError(
            f"cannot import app module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    found = getattr(module, attr, None)
    if not isinstance(found, Registry):
        raise ConfigurationError(
            f"{module_name}:{attr} is not a jobrun Registry "
            f"(got {type(found).__name__}); pass --app module:attribute"
        )
    return found


# -- migrate --------------------------------------------------------------------------------


@migrate_app.callback(invoke_without_command=True)
def migrate_command(ctx: typer.Context, database_url: DatabaseUrlOption = None) -> None:
    """Apply every pending migration (safe to run repeatedly and concurrently)."""
    if ctx.invoked_subcommand is not None:
        ctx.obj = database_url
        return
    applied = run_with_pool(database_url, migrate)
    if applied:
        typer.echo(f"applied {len(applied)} migration(s): {', '.join(map(str, applied))}")
    else:
        typer.echo("database is up to date")


@migrate_app.command("status")
def migrate_status_command(ctx: typer.Context, database_url: DatabaseUrlOption = None) -> None:
    """Show every migration and whether the database has it."""
    url = database_url or (ctx.obj if isinstance(ctx.obj, str) else None)
    rows = run_with_pool(url, migration_status)
    table = Table(title="migrations")
    table.add_column("version", justify="right")
    table.add_column("applied")
    table.add_column("file")
    for row in rows:
        applied = (
            (row.applied_at.strftime("%Y-%m-%d %H:%M:%S") if row.applied_at else "yes")
            if row.applied
            else "pending"
        )
        table.add_row(str(row.version), applied, row.file_name or "(not in this jobrun)")
    stdout.print(table)


# -- worker ---------------------------------------------------------------------------------

_LOG_RECORD_FIELDS = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonLogFormatter(logging.Formatter):
    """One JSON object per log record: time, level, logger, message and any extras."""

    def format(self, record: logging.LogRecord) -> str:
        """Render ``record`` as one line of JSON."""
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created).astimezone().isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _LOG_RECORD_FIELDS and not key.startswith("_"):
                data[key] = value
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def _setup_logging(level: str, fmt: str) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise fail(f"unknown log level {level!r}; choose debug, info, warning or error")
    if fmt not in ("text", "json"):
        raise fail(f"unknown log format {fmt!r}; choose text or json")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonLogFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)


@app.command("worker")
def worker_command(
    app_ref: Annotated[
        str,
        typer.Option(
            "--app",
            envvar="JOBRUN_APP",
            show_envvar=True,
            help="module[:attribute] whose Registry holds the handlers (attribute: registry).",
        ),
    ],
    database_url: DatabaseUrlOption = None,
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue", "-q", envvar="JOBRUN_QUEUE", show_envvar=True, help="Queue to work; repeat."
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(envvar="JOBRUN_CONCURRENCY", show_envvar=True, help="Jobs run at once."),
    ] = 10,
    lease: Annotated[
        str,
        typer.Option(envvar="JOBRUN_LEASE", show_envvar=True, help="Lease per claim, e.g. 30s."),
    ] = "30s",
    poll: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_POLL", show_envvar=True, help="Poll interval when no notification."
        ),
    ] = "1s",
    event_mode: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_EVENT_MODE", show_envvar=True, help="Events to record: all|terminal."
        ),
    ] = "all",
    scheduler: Annotated[
        bool,
        typer.Option(
            "--scheduler/--no-scheduler",
            envvar="JOBRUN_SCHEDULER",
            show_envvar=True,
            help="Also run the leader-elected scheduler.",
        ),
    ] = False,
    shutdown_grace: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_SHUTDOWN_GRACE",
            show_envvar=True,
            help="How long running jobs may finish after SIGTERM.",
        ),
    ] = "30s",
    log_level: Annotated[
        str, typer.Option(envvar="JOBRUN_LOG_LEVEL", show_envvar=True, help="Log level.")
    ] = "info",
    log_format: Annotated[
        str,
        typer.Option(envvar="JOBRUN_LOG_FORMAT", show_envvar=True, help="Log format: text|json."),
    ] = "text",
) -> None:
    """Run handlers for jobs of the given queues until SIGTERM or SIGINT."""
    from jobrun.postgres.lock import AdvisoryLocker
    from jobrun.postgres.migrate import check_schema
    from jobrun.postgres.notify import Notifier
    from jobrun.scheduler import Scheduler
    from jobrun.worker import Worker

    lease_td = _duration("--lease", lease)
    poll_td = _duration("--poll", poll)
    grace_td = _duration("--shutdown-grace", shutdown_grace)
    if event_mode not in {m.value for m in EventMode}:
        raise fail(f"unknown --event-mode {event_mode!r}; choose all or terminal")
    _setup_logging(log_level, log_format)
    queues = queue or ["default"]
    try:
        registry = load_registry(app_ref)
        url = resolve_database_url(database_url)
    except JobrunError as exc:
        raise fail(str(exc)) from None
    heartbeat = min(timedelta(seconds=10), lease_td // 3)

    async def body(pool: Pool) -> None:
        # Fail now, in one line, rather than have every claim fail on missing tables.
        await check_schema(pool)
        store = Store(pool, event_mode=event_mode)
        notifier = await Notifier.start(url, store.notify_channel)
        stop = asyncio.Event()
        scheduler_task: asyncio.Task[None] | None = None
        try:
            worker = Worker(
                store,
                registry,
                queues=queues,
                concurrency=concurrency,
                dispatcher=notifier,
                lease=lease_td,
                heartbeat_every=heartbeat,
                poll_every=poll_td,
                shutdown_grace=grace_td,
            )
            worker.install_signal_handlers()
            if scheduler:
                runner = Scheduler(store, AdvisoryLocker(url))
                scheduler_task = asyncio.create_task(runner.run(stop), name="jobrun-scheduler")
            await worker.run()
        finally:
            stop.set()
            if scheduler_task is not None:
                with contextlib.suppress(Exception):
                    await scheduler_task
            await notifier.close()

    run_with_pool(url, body, worker_concurrency=concurrency)


# -- enqueue --------------------------------------------------------------------------------


@app.command("enqueue")
def enqueue_command(
    job_type: Annotated[str, typer.Argument(metavar="TYPE", help="The job type.")],
    database_url: DatabaseUrlOption = None,
    payload: Annotated[
        str,
        typer.Option(envvar="JOBRUN_PAYLOAD", show_envvar=True, help="The payload, as JSON."),
    ] = "{}",
    queue: Annotated[
        str, typer.Option("--queue", "-q", envvar="JOBRUN_QUEUE", show_envvar=True)
    ] = "default",
    priority: Annotated[
        int,
        typer.Option(
            envvar="JOBRUN_PRIORITY", show_envvar=True, help="Lower runs first (default 0)."
        ),
    ] = 0,
    delay: Annotated[
        str | None,
        typer.Option(envvar="JOBRUN_DELAY", show_envvar=True, help="Run no sooner than, e.g. 5m."),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            envvar="JOBRUN_IDEMPOTENCY_KEY",
            show_envvar=True,
            help="Replaying the same key and body returns the stored job.",
        ),
    ] = None,
    max_attempts: Annotated[
        int | None, typer.Option(envvar="JOBRUN_MAX_ATTEMPTS", show_envvar=True)
    ] = None,
) -> None:
    """Enqueue one job and print its id."""
    body_value = _json("--payload", payload)
    options: dict[str, Any] = {
        "type": job_type,
        "payload": body_value,
        "queue": queue,
        "priority": priority,
        "idempotency_key": idempotency_key,
    }
    if delay is not None:
        options["delay"] = _duration("--delay", delay)
    if max_attempts is not None:
        options["max_attempts"] = max_attempts
    try:
        new = NewJob(**options)
    except JobrunError as exc:
        raise fail(str(exc)) from None

    job = run_with_store(database_url, lambda store: store.enqueue(new))
    typer.echo(str(job.id))
    if job.id != new.id:
        typer.echo(
            f"replayed existing job (idempotency key {idempotency_key!r}, state {job.state})",
            err=True,
        )


# -- jobs -----------------------------------------------------------------------------------


@jobs_app.command("list")
def jobs_list_command(
    database_url: DatabaseUrlOption = None,
    queue: Annotated[
        str | None, typer.Option("--queue", "-q", envvar="JOBRUN_QUEUE", show_envvar=True)
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
        str | None, typer.Option("--type", envvar="JOBRUN_TYPE", show_envvar=True)
    ] = None,
    limit: Annotated[int, typer.Option(envvar="JOBRUN_LIMIT", show_envvar=True, min=1)] = 50,
    cursor: Annotated[
        str | None,
        typer.Option(envvar="JOBRUN_CURSOR", show_envvar=True, help="Next-page cursor."),
    ] = None,
) -> None:
    """List jobs, newest first."""
    try:
        flt = JobFilter(queue=queue, state=_state(state) if state else None, type=job_type or None)
    except ValidationError as exc:
        raise _validation("filter", exc) from None
    after = _job_id(cursor) if cursor else None
    page = run_with_store(
        database_url, lambda store: store.list_jobs(flt, limit=limit, cursor=after)
    )
    table = Table(title=f"jobs ({len(page.jobs)})")
    table.add_column("id", no_wrap=True)
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
            _when(job.run_at),
            _when(job.created_at),
        )
    stdout.print(table)
    if page.next_cursor is not None:
        stdout.print(f"more: --cursor {page.next_cursor}")


def _events_table(events: Sequence[Any], title: str) -> Table:
    table = Table(title=title)
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("event")
    table.add_column("from")
    table.add_column("to")
    table.add_column("attempt", justify="right")
    table.add_column("owner")
    table.add_column("detail")
    for event in events:
        detail = (event.detail or "").strip().splitlines()
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            event.kind,
            event.from_state.value if event.from_state else "",
            event.to_state.value,
            str(event.attempt),
            event.owner or "",
            detail[-1][:120] if detail else "",
        )
    return table


@jobs_app.command("show")
def jobs_show_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Show one job's fields and its event history."""
    jid = _job_id(job_id)

    async def body(store: Store) -> tuple[Any, list[Any]]:
        return await store.get(jid), await store.events(jid)

    job, events = run_with_store(database_url, body)
    fields = Table(title=f"job {job.id}", show_header=False)
    fields.add_column("field", style="bold")
    fields.add_column("value")
    rows: list[tuple[str, str]] = [
        ("id", str(job.id)),
        ("type", job.type),
        ("queue", job.queue),
        ("state", job.state.value),
        ("cancel requested", "yes" if job.cancel_requested else "no"),
        ("attempts", f"{job.attempts}/{job.max_attempts}"),
        ("priority", str(job.priority)),
        (
            "backoff",
            f"{job.backoff.kind.value}, base {format_duration(job.backoff.base)}, "
            f"max {format_duration(job.backoff.max)}",
        ),
        ("payload", json.dumps(job.payload)),
        ("idempotency key", job.idempotency_key or ""),
        ("run at", _when(job.run_at)),
        ("lease owner", job.lease_owner or ""),
        ("lease expires", _when(job.lease_expires_at)),
        ("created", _when(job.created_at)),
        ("updated", _when(job.updated_at)),
        ("finished", _when(job.finished_at)),
        ("last error", (job.last_error or "").strip()),
    ]
    for name, value in rows:
        fields.add_row(name, value)
    stdout.print(fields)
    stdout.print(_events_table(events, "events"))


@jobs_app.command("cancel")
def jobs_cancel_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Cancel a queued job, or ask the worker running it to stop."""
    jid = _job_id(job_id)
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
    jid = _job_id(job_id)
    job = run_with_store(database_url, lambda store: store.retry(jid))
    typer.echo(f"job {job.id} is {job.state.value} again")


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
    age = _duration("--older-than", older_than)
    count = run_with_store(database_url, lambda store: store.purge(age))
    typer.echo(f"purged {count} job(s) finished more than {format_duration(age)} ago")


# -- events ---------------------------------------------------------------------------------


@app.command("events")
def events_command(
    job_id: Annotated[str, typer.Argument(metavar="JOB_ID", help="The job id.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Show the recorded transitions of one job, oldest first."""
    jid = _job_id(job_id)

    async def body(store: Store) -> list[Any]:
        await store.get(jid)  # a clear error for an unknown id, not an empty table
        return await store.events(jid)

    events = run_with_store(database_url, body)
    stdout.print(_events_table(events, f"events of job {jid}"))


# -- schedules ------------------------------------------------------------------------------


def _trigger(schedule: Schedule) -> str:
    if schedule.cron is not None:
        return f"cron {schedule.cron}"
    assert schedule.every is not None
    return f"every {format_duration(schedule.every)}"


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
        str, typer.Option("--queue", "-q", envvar="JOBRUN_QUEUE", show_envvar=True)
    ] = "default",
    timezone: Annotated[
        str, typer.Option(envvar="JOBRUN_TIMEZONE", show_envvar=True, help="IANA zone for cron.")
    ] = "UTC",
    priority: Annotated[int, typer.Option(envvar="JOBRUN_PRIORITY", show_envvar=True)] = 0,
    max_attempts: Annotated[
        int | None, typer.Option(envvar="JOBRUN_MAX_ATTEMPTS", show_envvar=True)
    ] = None,
) -> None:
    """Create a schedule that enqueues a job on a cron expression or a fixed interval."""
    if (cron is None) == (every is None):
        raise fail("give exactly one of --cron and --every")
    options: dict[str, Any] = {
        "name": name,
        "type": job_type,
        "payload": _json("--payload", payload),
        "queue": queue,
        "timezone": timezone,
        "priority": priority,
        "cron": cron,
        "every": _duration("--every", every) if every is not None else None,
    }
    if max_attempts is not None:
        options["max_attempts"] = max_attempts
    try:
        new = NewSchedule(**options)
    except JobrunError as exc:
        raise fail(str(exc)) from None
    created = run_with_store(database_url, lambda store: store.create_schedule(new))
    typer.echo(
        f"schedule {created.name!r} created ({_trigger(created)}); "
        f"next run {_when(created.next_run_at)} UTC"
    )


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
    for s in schedules:
        table.add_row(
            s.name,
            s.type,
            s.queue,
            _trigger(s),
            s.timezone,
            _when(s.next_run_at),
            _when(s.last_run_at),
            "paused" if s.paused else "active",
        )
    stdout.print(table)


@schedules_app.command("pause")
def schedules_pause_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Stop a schedule from firing until it is resumed."""
    schedule = run_with_store(database_url, lambda store: store.pause_schedule(name))
    typer.echo(f"schedule {schedule.name!r} paused")


@schedules_app.command("resume")
def schedules_resume_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Let a paused schedule fire again, from now on."""
    schedule = run_with_store(database_url, lambda store: store.resume_schedule(name))
    typer.echo(f"schedule {schedule.name!r} resumed; next run {_when(schedule.next_run_at)} UTC")


@schedules_app.command("remove")
def schedules_remove_command(
    name: Annotated[str, typer.Argument(help="The schedule name.")],
    database_url: DatabaseUrlOption = None,
) -> None:
    """Delete a schedule; jobs it already enqueued are kept."""
    run_with_store(database_url, lambda store: store.delete_schedule(name))
    typer.echo(f"schedule {name!r} removed")


# -- stats ----------------------------------------------------------------------------------


@app.command("stats")
def stats_command(database_url: DatabaseUrlOption = None) -> None:
    """Job counts per queue and state, and the age of each queue's oldest queued job."""

    async def body(store: Store) -> tuple[list[Any], datetime]:
        return await store.depth(), await store.now()

    depths, now = run_with_store(database_url, body)
    states = list(JobState)
    counts: dict[str, dict[JobState, int]] = {}
    oldest: dict[str, datetime] = {}
    for depth in depths:
        counts.setdefault(depth.queue, {})[depth.state] = depth.count
        if depth.state is JobState.QUEUED and depth.oldest_created_at is not None:
            oldest[depth.queue] = depth.oldest_created_at
    table = Table(title="queues")
    table.add_column("queue")
    for state in states:
        table.add_column(state.value, justify="right")
    table.add_column("oldest queued", justify="right")
    for name in sorted(counts):
        age = oldest.get(name)
        table.add_row(
            name,
            *(str(counts[name].get(state, 0)) for state in states),
            format_duration(max(now - age, timedelta(0))) if age is not None else "-",
        )
    stdout.print(table)


# -- demo -----------------------------------------------------------------------------------


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


def main() -> None:
    """Entry point of the ``jobrun`` console script.

    Usage errors (a missing option, ``--priority abc``) get the same one-line
    ``error:`` form and exit code 2 as every other bad input, instead of the
    framework's multi-line panel.
    """
    try:
        code = app(standalone_mode=False)
    except Exception as exc:
        if type(exc).__name__ == "Abort":  # Ctrl-C at a prompt
            sys.exit(130)
        message = getattr(exc, "format_message", None)
        exit_code = getattr(exc, "exit_code", None)
        if not callable(message) or not isinstance(exit_code, int):
            raise
        typer.echo(f"error: {' '.join(str(message()).split())}", err=True)
        sys.exit(EXIT_JOBRUN_ERROR if exit_code else 0)
    except KeyboardInterrupt:
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
