"""``jobrun worker``: run an application's handlers until SIGTERM or SIGINT.

The command loads the application's :class:`~jobrun.registry.Registry` from
``--app module[:attribute]`` (:func:`load_registry`), checks its options before
connecting, and runs the worker through :class:`~jobrun.client.Client`, exactly
as a service embedding jobrun does: pool, schema check, LISTEN/NOTIFY
dispatcher, worker, with ``--scheduler`` the leader-elected scheduler and,
unless ``--no-maintenance``, the leader-elected maintenance service that
prunes old jobs by the ``JOBRUN_RETENTION_*`` settings. ``--metrics-port``
adds Prometheus metrics and the health endpoints (:mod:`jobrun.telemetry.prometheus`).

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
import inspect
import os
import sys
from typing import Annotated, Any

import typer
from pydantic import ValidationError

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
from jobrun.cli.config_options import config_options, given_settings
from jobrun.cli.log_setup import setup_logging
from jobrun.cli.supervisor import Supervisor
from jobrun.client import Client
from jobrun.config import Config, queue_list
from jobrun.domain.refusals import field_problem
from jobrun.errors import ConfigurationError, JobrunError
from jobrun.registry import Registry
from jobrun.telemetry.serving import load_metrics

__all__ = ["WORKER_SETTINGS", "load_registry", "worker_command"]


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


_SHARED_SETTINGS = ("database_url", "pgbouncer", "direct_url")
"""Settings every database command takes, declared once in :mod:`jobrun.cli.app`."""

_READ_SETTINGS = ("read_url",)
"""Settings of the commands that only read (``jobs list``, ``stats``, ``web``): a worker reads
nothing a replica could serve."""

WORKER_SETTINGS = tuple(
    name for name in Config.model_fields if name not in _SHARED_SETTINGS + _READ_SETTINGS
)
"""The ``Config`` fields ``jobrun worker`` takes as options of its own (derived from Config)."""


def _worker_options(
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
    log_level: LogLevelOption = "info",
    log_format: LogFormatOption = "text",
    processes: Annotated[
        int,
        typer.Option(
            envvar="JOBRUN_PROCESSES",
            show_envvar=True,
            help="Worker processes under one supervisor (restarts crashed ones).",
        ),
    ] = 1,
) -> None:
    """The options of ``jobrun worker`` that are not settings of ``Config``."""


def worker_command(**values: Any) -> None:
    """Run handlers for jobs of the given queues until SIGTERM or SIGINT.

    Every setting of ``Config`` is an option (``--lease``, ``--claim-ahead``, ...)
    and a ``JOBRUN_*`` variable; an option given wins over its variable.
    """
    processes: int = values["processes"]
    if processes < 1:
        raise fail(f"--processes must be at least 1, got {processes}")
    given = given_settings(values, WORKER_SETTINGS)
    if "queues" in given:  # --queue mail,default names two queues, as JOBRUN_QUEUE does
        given["queues"] = [name for value in given["queues"] for name in queue_list(value)]
    for name in _SHARED_SETTINGS:
        if values[name] is not None:
            given[name] = values[name]
    config = _config(given)
    if config.metrics_port is not None:
        port = config.metrics_port
        if port and port + processes - 1 > 65535:
            raise fail(
                f"--metrics-port {port} with --processes {processes} "
                f"needs ports up to {port + processes - 1}, over 65535"
            )
        try:
            load_metrics()
        except JobrunError as exc:
            raise fail(f"--metrics-port: {exc}") from None
    setup_logging(values["log_level"], values["log_format"])
    try:
        registry = load_registry(values["app_ref"])
    except JobrunError as exc:
        raise fail(str(exc)) from None
    if processes > 1:
        raise typer.Exit(_supervise(config, values, processes))

    async def work() -> None:
        # The same wiring as any service: the Client opens the pool, checks the
        # schema, starts the notifier (and the scheduler) around the worker.
        async with Client(registry, config) as client:
            await client.run_worker(handle_signals=True)

    try:
        jobrun_loop.run(work())
    except JobrunError as exc:
        raise fail(str(exc)) from None


def _config(given: dict[str, Any]) -> Config:
    """``Config`` from the options given and the environment; one error line naming the option."""
    try:
        # A worker reads nothing a replica could serve: JOBRUN_READ_URL, set
        # for the dashboard in a shared environment, opens no pool here.
        return Config(**{**given, "read_url": None})
    except ConfigurationError as exc:
        cause = exc.__cause__
        if not isinstance(cause, ValidationError):
            raise fail(str(exc)) from None
        problems = []
        for err in cause.errors(include_url=False):
            field = str(err["loc"][0]) if err["loc"] else ""
            source = (
                "--" + field.replace("_", "-")
                if field in given
                else "/".join(Config.variable_names(field))
                if field in Config.model_fields
                else "configuration"
            )
            problems.append(field_problem(source, err, known=Config.model_fields, noun="setting"))
        raise fail("; ".join(problems)) from None


def _supervise(config: Config, values: dict[str, Any], processes: int) -> int:
    """Run ``processes`` children of this command, each given this one's resolved settings.

    The settings were checked once, here; each child is ``jobrun worker
    --processes 1`` with the resolved ``Config`` in its environment
    (``JOBRUN_*``, so the database URL does not show in ``ps``), child ``i``
    serving metrics on ``metrics_port + i``.
    """
    argv = [sys.executable, "-m", "jobrun", "worker", "--processes", "1"]
    argv += ["--app", values["app_ref"], "--log-level", values["log_level"]]
    argv += ["--log-format", values["log_format"]]
    inherited = {k: v for k, v in os.environ.items() if k != "JOBRUN_PROCESSES"}
    for name in Config.model_fields:  # aliases would compete with the canonical names
        for variable in Config.variable_names(name):
            inherited.pop(variable, None)
    resolved = config.environment()

    def child_env(index: int) -> dict[str, str]:
        env = {**inherited, **resolved}
        if config.metrics_port:
            env["JOBRUN_METRICS_PORT"] = str(config.metrics_port + index)
        return env

    supervisor = Supervisor(
        command=lambda _index: argv,
        processes=processes,
        env=child_env,
        grace=config.shutdown_grace.total_seconds(),
    )
    return supervisor.run()


def _register() -> None:
    fixed = list(inspect.signature(_worker_options, eval_str=True).parameters.values())
    derived = [option.parameter for option in config_options(WORKER_SETTINGS)]
    parameters = [*fixed, *derived]
    worker_command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    worker_command.__annotations__ = {p.name: p.annotation for p in parameters}
    app.command("worker")(worker_command)


_register()
