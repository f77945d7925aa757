"""``jobrun migrate`` and ``jobrun migrate status``: apply or inspect the schema.

``migrate`` alone applies every pending migration; ``status`` lists each one and
whether the database has it. A ``--database-url`` given before ``status`` is
passed down through the typer context.
"""

from __future__ import annotations

import typer
from rich.table import Table

from jobrun._endings import plural
from jobrun.cli.app import (
    DatabaseUrlOption,
    DirectUrlOption,
    PgbouncerOption,
    app,
    run_with_client,
    run_with_pool,
)
from jobrun.cli.rendering import stdout
from jobrun.client import Client
from jobrun.postgres import migration_status

__all__ = ["migrate_app"]

migrate_app = typer.Typer(help="Apply or inspect the database schema migrations.")
app.add_typer(migrate_app, name="migrate")


@migrate_app.callback(invoke_without_command=True)
def migrate_command(
    ctx: typer.Context,
    database_url: DatabaseUrlOption = None,
    direct_url: DirectUrlOption = None,
    pgbouncer: PgbouncerOption = False,
) -> None:
    """Apply every pending migration (safe to run repeatedly and concurrently).

    With --direct-url they run there: a migration run holds a session lock,
    which PgBouncer in transaction mode cannot carry.
    """
    if ctx.invoked_subcommand is not None:
        ctx.obj = database_url
        return

    async def run(client: Client) -> list[int]:
        return await client.migrate()

    applied = run_with_client(
        database_url, run, concurrency=1, direct_url=direct_url, pgbouncer=pgbouncer
    )
    if applied:
        typer.echo(f"applied {plural(len(applied), 'migration')}: {', '.join(map(str, applied))}")
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
