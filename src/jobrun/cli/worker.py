"""``jobrun worker``: run an application's handlers until SIGTERM or SIGINT.

The command loads the application's :class:`~jobrun.registry.Registry` from
``--app module[:attribute]`` (:func:`load_registry`), checks its options before
connecting, and runs the worker through :class:`~jobrun.client.Client`, exactly
as a service embedding jobrun does: pool, schema check, LISTEN/NOTIFY
dispatcher, worker, with ``--scheduler`` the leader-elected scheduler and,
unless ``--no-maintenance``, the leader-elected maintenance service that
prunes old jobs by the ``JOBRUN_RETENTION_*`` settings. ``--metrics-port``
adds Prometheus metrics and the health endpoints (:mod:`jobrun.metrics`).

``--pgbouncer`` says ``--database-url`` is PgBouncer in transaction mode;
``--direct-url`` then names the server itself, for the LISTEN connection and
the leader locks (without it the worker polls, and leader locks are held in
open transactions through the bouncer). ``--no-listen`` polls without PgBouncer.

``--processes N`` (N > 1) runs N such workers as child processes of a
supervisor (:mod:`jobrun.cli.supervisor`) that forwards SIGTERM/SIGINT,
restarts a crashed child with backoff and exits with the children's status.
Every child may run ``--scheduler`` and the maintenance service: both are
leader-elected, so one child leads. With ``--metrics-port P`` child i serves
on port P + i.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated

import typer

from jobrun import loop as jobrun_loop
from jobrun.cli.app import (
    DatabaseUrlOption,
    DirectUrlOption,
    LogFormatOption,
    LogLevelOption,
    PgbouncerOption,
    app,
    fail,
)
from jobrun.cli.inputs import read_duration
from jobrun.cli.log_setup import setup_logging
from jobrun.cli.supervisor import Supervisor
from jobrun.client import Client, load_metrics
from jobrun.config import Config, queue_list
from jobrun.errors import JobrunError
from jobrun.job import EventMode
from jobrun.registry import Registry

__all__ = ["load_registry", "worker_command"]


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
    pgbouncer: PgbouncerOption = False,
    direct_url: DirectUrlOption = None,
    listen: Annotated[
        bool,
        typer.Option(
            "--listen/--no-listen",
            envvar="JOBRUN_LISTEN",
            show_envvar=True,
            help="Wake on LISTEN/NOTIFY; --no-listen polls only.",
        ),
    ] = True,
    handoff: Annotated[
        bool,
        typer.Option(
            "--handoff/--no-handoff",
            envvar="JOBRUN_HANDOFF",
            show_envvar=True,
            help="Offer free slots so an enqueue hands its job over at once; "
            "--no-handoff: every job waits for a claim.",
        ),
    ] = True,
    queue: Annotated[
        list[str] | None,
        typer.Option(
            "--queue",
            "-q",
            envvar="JOBRUN_QUEUE",
            show_envvar=True,
            help="Queue to work; repeat, or list them: mail,default.",
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(envvar="JOBRUN_CONCURRENCY", show_envvar=True, help="Jobs run at once."),
    ] = 100,
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
    maintenance: Annotated[
        bool | None,
        typer.Option(
            "--maintenance/--no-maintenance",
            envvar="JOBRUN_MAINTENANCE",
            show_envvar=True,
            help="Also run the leader-elected retention service (default: on). "
            "Ages: JOBRUN_RETENTION_SUCCEEDED|CANCELLED|DEAD|EVENTS|EFFECTS.",
        ),
    ] = None,
    shutdown_grace: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_SHUTDOWN_GRACE",
            show_envvar=True,
            help="How long running jobs may finish after SIGTERM.",
        ),
    ] = "30s",
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    metrics_port: Annotated[
        int | None,
        typer.Option(
            envvar="JOBRUN_METRICS_PORT",
            show_envvar=True,
            help="Serve /metrics, /healthz and /readyz on this port (needs jobrun[metrics]).",
        ),
    ] = None,
    metrics_host: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_METRICS_HOST",
            show_envvar=True,
            help="Address the metrics server binds.",
        ),
    ] = "127.0.0.1",
    queue_stats_every: Annotated[
        str,
        typer.Option(
            envvar="JOBRUN_QUEUE_STATS_EVERY",
            show_envvar=True,
            help="How often the elected worker refreshes the queue gauges.",
        ),
    ] = "10s",
    processes: Annotated[
        int,
        typer.Option(
            envvar="JOBRUN_PROCESSES",
            show_envvar=True,
            help="Worker processes under one supervisor (restarts crashed ones).",
        ),
    ] = 1,
) -> None:
    """Run handlers for jobs of the given queues until SIGTERM or SIGINT."""
    lease_td = read_duration("--lease", lease)
    poll_td = read_duration("--poll", poll)
    grace_td = read_duration("--shutdown-grace", shutdown_grace)
    stats_td = read_duration("--queue-stats-every", queue_stats_every)
    if event_mode not in {m.value for m in EventMode}:
        raise fail(f"unknown --event-mode {event_mode!r}; choose all or terminal")
    if processes < 1:
        raise fail(f"--processes must be at least 1, got {processes}")
    if metrics_port is not None:
        if not 0 <= metrics_port <= 65535:
            raise fail(f"--metrics-port must be between 0 and 65535, got {metrics_port}")
        if metrics_port and metrics_port + processes - 1 > 65535:
            raise fail(
                f"--metrics-port {metrics_port} with --processes {processes} "
                f"needs ports up to {metrics_port + processes - 1}, over 65535"
            )
        try:
            load_metrics()
        except JobrunError as exc:
            raise fail(f"--metrics-port: {exc}") from None
    # JOBRUN_QUEUE=mail,default is one value to the option parser: read it as the list it is.
    queues = [name for value in queue for name in queue_list(value)] if queue else ["default"]
    setup_logging(log_level, log_format)
    try:
        registry = load_registry(app_ref)
        config = Config(
            database_url=database_url,
            pgbouncer=pgbouncer,
            direct_url=direct_url,
            listen=listen,
            handoff=handoff,
            queues=queues,
            concurrency=concurrency,
            lease=lease_td,
            poll=poll_td,
            shutdown_grace=grace_td,
            event_mode=event_mode,
            scheduler=scheduler,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            queue_stats_every=stats_td,
        )
        if maintenance is not None:  # unset: the Config's default (on) decides
            config = config.replace(maintenance=maintenance)
    except JobrunError as exc:
        raise fail(str(exc)) from None

    if processes > 1:
        # The options were checked above, once; each child is this same
        # command with --processes 1 (the database URL goes by environment,
        # not argv, so it does not show in ps).
        def child(index: int) -> list[str]:
            argv = [sys.executable, "-m", "jobrun", "worker", "--processes", "1"]
            argv += ["--app", app_ref, "--concurrency", str(concurrency), "--lease", lease]
            argv += ["--poll", poll, "--event-mode", event_mode, "--shutdown-grace", shutdown_grace]
            argv += ["--log-level", log_level, "--log-format", log_format]
            argv += ["--metrics-host", metrics_host, "--queue-stats-every", queue_stats_every]
            argv.append("--scheduler" if scheduler else "--no-scheduler")
            argv.append("--pgbouncer" if pgbouncer else "--no-pgbouncer")
            argv.append("--listen" if listen else "--no-listen")
            argv.append("--handoff" if handoff else "--no-handoff")
            if maintenance is not None:
                argv.append("--maintenance" if maintenance else "--no-maintenance")
            if metrics_port is not None:
                # One port each: child i serves metrics_port + i (0: any free port).
                argv += ["--metrics-port", str(metrics_port + index if metrics_port else 0)]
            for name in queues:
                argv += ["--queue", name]
            return argv

        env = {k: v for k, v in os.environ.items() if k != "JOBRUN_PROCESSES"}
        if database_url is not None:
            env["JOBRUN_DATABASE_URL"] = database_url
        if direct_url is not None:
            env["JOBRUN_DIRECT_URL"] = direct_url
        supervisor = Supervisor(
            command=child, processes=processes, env=env, grace=grace_td.total_seconds()
        )
        raise typer.Exit(supervisor.run())

    async def work() -> None:
        # The same wiring as any service: the Client opens the pool, checks the
        # schema, starts the notifier (and the scheduler) around the worker.
        async with Client(registry, config) as client:
            await client.run_worker(handle_signals=True)

    try:
        jobrun_loop.run(work())
    except JobrunError as exc:
        raise fail(str(exc)) from None
