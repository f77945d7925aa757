"""``jobrun workers``: the worker processes that are alive, and what each runs."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from jobrun.cli.app import DatabaseUrlOption, ReadUrlOption, app, run_with_reader
from jobrun.cli.durations import human_duration
from jobrun.cli.rendering import stdout
from jobrun.domain import WorkerInfo

__all__ = ["workers_command"]


@app.command("workers")
def workers_command(
    database_url: DatabaseUrlOption = None,
    read_url: ReadUrlOption = None,
    jobs: bool = typer.Option(False, "--jobs", help="Also list the jobs each worker runs."),
) -> None:
    """List the worker processes: where they run, their queues, and what they run now.

    A worker writes its row every heartbeat interval; one not heard from for
    three intervals is shown as gone (it died, or cannot reach the database).
    """

    async def body(store: Any) -> list[WorkerInfo]:
        return list(await store.workers())

    found = run_with_reader(database_url, read_url, body)
    if not found:
        stdout.print("no workers")
        return
    table = Table(title="workers")
    for column in ("worker", "pid", "version", "queues", "running", "up", "last seen", "status"):
        table.add_column(column)
    for worker in found:
        table.add_row(
            worker.owner,
            str(worker.pid),
            worker.version,
            ",".join(worker.queues),
            f"{worker.leased}/{worker.concurrency}",
            human_duration(worker.seen_at - worker.started_at),
            f"{human_duration(worker.seen_at - worker.last_seen_at)} ago",
            "alive" if worker.alive else "gone",
        )
    stdout.print(table)
    if jobs:
        running = Table(title="running jobs")
        for column in ("worker", "job", "type", "queue", "running for"):
            running.add_column(column)
        for worker in found:
            for job in worker.running:
                running.add_row(
                    worker.owner,
                    str(job.id),
                    job.type,
                    job.queue,
                    human_duration(worker.seen_at - job.started_at),
                )
        stdout.print(running)
