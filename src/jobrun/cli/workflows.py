"""``jobrun workflows show``: the jobs linked to one job by dependencies, step by step."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.table import Table

from jobrun.cli.app import DatabaseUrlOption, ReadUrlOption, app, run_with_reader
from jobrun.cli.inputs import read_job_id
from jobrun.cli.rendering import stdout
from jobrun.domain import Workflow
from jobrun.postgres.store import Store

__all__ = ["workflows_app", "workflows_show_command"]

workflows_app = typer.Typer(
    help="Show workflows: jobs linked by dependencies (groups, chains).", no_args_is_help=True
)
app.add_typer(workflows_app, name="workflows")


@workflows_app.command("show")
def workflows_show_command(
    job_id: Annotated[str, typer.Argument(metavar="ID", help="Any job of the workflow.")],
    database_url: DatabaseUrlOption = None,
    read_url: ReadUrlOption = None,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """Show the workflow a job belongs to: every step, by level, with its state.

    A step's level is one more than the deepest step it waits for, so level 0
    holds the jobs that wait for nothing, and a group's callback comes after
    its parts. At most 10,000 steps are shown.
    """
    jid = read_job_id(job_id)

    async def body(store: Store) -> Workflow:
        return await store.workflow(jid)

    workflow = run_with_reader(database_url, read_url, body)
    if as_json:
        typer.echo(json.dumps(workflow.as_json(), ensure_ascii=False))
        return
    waits: dict[Any, int] = {}
    for edge in workflow.edges:
        waits[edge.job_id] = waits.get(edge.job_id, 0) + 1
    counts = ", ".join(f"{n} {state}" for state, n in sorted(workflow.counts().items()))
    table = Table(title=f"workflow of {jid}: {len(workflow.steps)} steps ({counts})")
    for column in ("level", "job", "type", "queue", "state", "attempts", "waits for", "error"):
        table.add_column(column)
    for depth, level in enumerate(workflow.levels()):
        for step in level:
            table.add_row(
                str(depth),
                str(step.job_id),
                step.type or "",
                step.queue or "",
                "purged" if step.state is None else step.state.value,
                "" if step.attempts is None else str(step.attempts),
                str(waits.get(step.job_id, 0)),
                " ".join((step.error or "").split())[:80],
            )
    stdout.print(table)
    if not workflow.complete:
        stdout.print(f"note: only the first {len(workflow.steps)} steps are shown")
