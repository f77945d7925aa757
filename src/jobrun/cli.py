"""The ``jobrun`` command: operate a jobrun database from a shell.

Every command that needs the database takes ``--database-url`` (or reads
``JOBRUN_DATABASE_URL``; with neither it uses the embedded server) and runs its
async body through :func:`run_with_pool`, which opens the pool, closes it, and
turns any :class:`~jobrun.errors.JobrunError` into one ``error: ...`` line on
stderr and exit code 2, without a traceback. New command groups (worker, jobs,
schedules, ...) are typer apps added with ``app.add_typer`` and follow the same
pattern.

The CLI talks to the database only through :mod:`jobrun.postgres`; it never
imports psycopg or the generated query layer (an import-linter contract).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from jobrun.errors import JobrunError
from jobrun.postgres import (
    Pool,
    migrate,
    migration_status,
    open_pool,
    resolve_database_url,
)

__all__ = ["EXIT_JOBRUN_ERROR", "DatabaseUrlOption", "app", "main", "run_with_pool"]

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

stdout = Console()


def fail(message: str) -> typer.Exit:
    """Print ``error: message`` on stderr; return the Exit to raise (code 2)."""
    typer.echo(f"error: {message}", err=True)
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
        return asyncio.run(run())
    except JobrunError as exc:
        raise fail(str(exc)) from None


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


def main() -> None:
    """Entry point of the ``jobrun`` console script."""
    app()


if __name__ == "__main__":
    main()
