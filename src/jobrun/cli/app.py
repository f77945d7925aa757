"""The typer app every ``jobrun`` command hangs on, and what the commands share.

Shared here: the ``--database-url`` option, :func:`fail` (one ``error: ...`` line
and exit code 2), :func:`run_with_pool` / :func:`run_with_store` (open the pool,
run an async body, close the pool, map any :class:`~jobrun.errors.JobrunError`
to :func:`fail`) and :func:`main`, the console-script entry point. The commands
live in sibling modules that register themselves on :data:`app` when
:mod:`jobrun.cli` imports them.
"""

from __future__ import annotations

import contextlib
import getpass
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import typer

from jobrun import loop as jobrun_loop
from jobrun._version import version
from jobrun.client import Client
from jobrun.errors import JobrunError
from jobrun.postgres import Pool
from jobrun.postgres.store import Store
from jobrun.registry import Registry

__all__ = [
    "EXIT_JOBRUN_ERROR",
    "DatabaseUrlOption",
    "DirectUrlOption",
    "LogFormatOption",
    "LogLevelOption",
    "PgbouncerOption",
    "app",
    "cli_actor",
    "fail",
    "main",
    "run_with_client",
    "run_with_pool",
    "run_with_store",
]

EXIT_JOBRUN_ERROR = 2
"""Exit code of a command that failed with a JobrunError (bad input, database down, ...)."""

T = TypeVar("T")


def cli_actor() -> str:
    """Who runs this command, as the changes it makes record it: ``<user>@<host> via cli``.

    The dashboard records ``<user> via web``; naming the login and the machine
    lets an operator tell who cancelled a job or paused a queue from a shell.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (some containers)
        user = "unknown"
    return f"{user}@{socket.gethostname()} via cli"


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

DirectUrlOption = Annotated[
    str | None,
    typer.Option(
        "--direct-url",
        envvar="JOBRUN_DIRECT_URL",
        show_envvar=True,
        help="PostgreSQL URL straight to the server, bypassing PgBouncer: used for "
        "LISTEN, leader locks and migrations. Default: --database-url.",
    ),
]
"""The ``--direct-url`` option: where connections that need a session of their own go."""

ReadUrlOption = Annotated[
    str | None,
    typer.Option(
        "--read-url",
        envvar="JOBRUN_READ_URL",
        show_envvar=True,
        help="PostgreSQL URL of a read replica to read from; what is read there is shown "
        "with the replica's lag. Default: --database-url.",
    ),
]
"""The ``--read-url`` option of the commands that only read: where their reads go."""

LogLevelOption = Annotated[
    str, typer.Option(envvar="JOBRUN_LOG_LEVEL", show_envvar=True, help="Log level.")
]
"""The ``--log-level`` option of the long-running commands (worker, web)."""

LogFormatOption = Annotated[
    str,
    typer.Option(envvar="JOBRUN_LOG_FORMAT", show_envvar=True, help="Log format: text|json."),
]
"""The ``--log-format`` option of the long-running commands (worker, web)."""

PgbouncerOption = Annotated[
    bool,
    typer.Option(
        "--pgbouncer/--no-pgbouncer",
        envvar="JOBRUN_PGBOUNCER",
        show_envvar=True,
        help="--database-url is PgBouncer in transaction mode: no session state and no "
        "prepared statements on pooled connections; without --direct-url, poll only.",
    ),
]
"""The ``--pgbouncer`` switch: the pool goes through PgBouncer in transaction mode."""

app = typer.Typer(
    name="jobrun",
    help="Operate jobrun: a durable job queue on PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"jobrun {version()}")
        raise typer.Exit()


@app.callback()
def _options(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print jobrun's version and exit.",
        ),
    ] = False,
) -> None:
    """Operate jobrun: a durable job queue on PostgreSQL."""


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; return the Exit to raise (code 2)."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_JOBRUN_ERROR)


def run_with_client(
    database_url: str | None,
    body: Callable[[Client], Awaitable[T]],
    registry: Registry | None = None,
    **settings: Any,
) -> T:
    """Run ``body`` with an open :class:`~jobrun.client.Client`; map JobrunError to exit 2.

    Every command starts jobrun the way a service does: one Client from one
    Config (``settings`` and ``JOBRUN_*`` variables; the URL explicit, then
    ``JOBRUN_DATABASE_URL``, then the embedded server), holding ``registry``
    when given. The client is always closed before returning.
    """

    async def run() -> T:
        async with Client(registry, database_url=database_url, **settings) as client:
            return await body(client)

    try:
        return jobrun_loop.run(run())
    except JobrunError as exc:
        raise fail(str(exc)) from None


def run_with_pool(database_url: str | None, body: Callable[[Pool], Awaitable[T]]) -> T:
    """Like :func:`run_with_client`, handing ``body`` the client's pool."""

    async def with_pool(client: Client) -> T:
        return await body(client.pool)

    return run_with_client(database_url, with_pool, concurrency=1)


def run_with_store(database_url: str | None, body: Callable[[Store], Awaitable[T]]) -> T:
    """Like :func:`run_with_client`, handing ``body`` the client's :class:`Store`."""

    async def with_store(client: Client) -> T:
        return await body(client.store)

    return run_with_client(database_url, with_store, concurrency=1)


def run_with_reader(
    database_url: str | None, read_url: str | None, body: Callable[[Store], Awaitable[T]]
) -> T:
    """Like :func:`run_with_store`, handing ``body`` the client's :attr:`~Client.reader`.

    With ``read_url`` (or ``JOBRUN_READ_URL``) the reads go to that replica,
    and a line on standard error says how far behind the primary it is, so
    the output is never taken for the primary's present state.
    """

    async def with_reader(client: Client) -> T:
        try:
            return await body(client.reader)
        finally:
            # Also after an error: "job ... does not exist" on a replica may
            # only mean it has not replayed the job yet.
            if client.config.read_url is not None:
                with contextlib.suppress(JobrunError):
                    lag = await client.reader.replica_lag()
                    note = lag.describe() if lag is not None else "read from --read-url, a primary"
                    typer.echo(f"note: {note}", err=True)

    settings: dict[str, Any] = {} if read_url is None else {"read_url": read_url}
    return run_with_client(database_url, with_reader, None, concurrency=1, **settings)


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
