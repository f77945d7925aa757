"""``jobrun queues list|pause|resume|drain|clear|limit|unlimit``: queue controls for operators.

A queue needs no setup to be used; these commands store a pause or limits for
it, and the claim statement enforces them across every worker at once: a
paused queue is not claimed from (its running jobs finish), a concurrency
limit caps its leased jobs fleet-wide, a rate caps its claims per interval.
``drain`` is a pause that reports (and with ``--wait`` waits for) the jobs
still running; ``clear`` deletes the queue's jobs that are not running, once
told how many.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from jobrun._endings import plural
from jobrun.cli.app import DatabaseUrlOption, app, cli_actor, fail, run_with_store
from jobrun.cli.durations import DurationError, format_duration, parse_duration
from jobrun.cli.rendering import stdout
from jobrun.domain import QueueControls, QueueInfo, queue_limits_problem, queue_name_problem
from jobrun.errors import ConfirmationNeeded
from jobrun.ports import Store

__all__ = ["parse_rate", "queues_app", "unused_queue_note"]

T = TypeVar("T")

queues_app = typer.Typer(
    help="Pause, resume and limit queues across every worker.", no_args_is_help=True
)
app.add_typer(queues_app, name="queues")

QueueArgument = Annotated[str, typer.Argument(help="The queue name.")]

_RATE = re.compile(r"\s*(-?\d+)\s*/\s*(\S+)\s*")


def parse_rate(text: str) -> tuple[int, timedelta]:
    """Read ``N/INTERVAL`` (``100/1s``, ``10/1m``; ``10/m`` for one minute) into (N, interval).

    Raises DurationError (a ConfigurationError) with a message fit for the user.
    """
    match = _RATE.fullmatch(text)
    if match is None:
        raise DurationError(f"invalid rate {text!r}: use COUNT/INTERVAL, like 100/1s or 10/1m")
    per = match.group(2)
    # "10/m" reads as ten a minute: a bare unit means one of it.
    interval = parse_duration(f"1{per}" if per.isalpha() else per)
    return int(match.group(1)), interval


def _checked_name(name: str) -> str:
    problem = queue_name_problem(name)
    if problem is not None:
        raise fail(problem)
    return name


async def unused_queue_note(store: Store, name: str) -> str | None:
    """A note for an operator who names a queue nothing uses, else None.

    Controls need no queue to exist first (a queue may be paused or limited
    before its first job), so such a name is not refused; but a mistyped name
    would otherwise be paused silently while the queue meant runs on. In use:
    a control set on it, jobs queued or leased in it, or a live worker serving
    it. The note names the closest name in use, if one is close.
    """
    in_use = {queue.name for queue in await store.list_queues()}
    in_use.update(q for worker in await store.workers() if worker.alive for q in worker.queues)
    if name in in_use:
        return None
    near = difflib.get_close_matches(name, sorted(in_use), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return (
        f"note: no job waits or runs in queue {name!r}, no control is set on it"
        f" and no worker serves it{hint}"
    )


def _run_control(
    database_url: str | None, name: str, control: Callable[[Store], Awaitable[T]]
) -> T:
    """Run ``control`` on the store, first printing on stderr the note for a queue nobody uses."""

    async def noted(store: Store) -> T:
        note = await unused_queue_note(store, name)
        if note is not None:
            typer.echo(note, err=True)
        return await control(store)

    return run_with_store(database_url, noted)


def _limits(controls: QueueControls) -> str:
    parts = []
    if controls.concurrency_limit is not None:
        parts.append(f"concurrency {controls.concurrency_limit}")
    if controls.rate_limit is not None and controls.rate_interval is not None:
        parts.append(f"rate {controls.rate_limit}/{format_duration(controls.rate_interval)}")
    if controls.key_limit is not None:
        parts.append(f"{controls.key_limit} per concurrency key")
    return ", ".join(parts) or "no limits"


@queues_app.command("list")
def queues_list_command(database_url: DatabaseUrlOption = None) -> None:
    """List queues with controls or jobs waiting or running: controls and load."""
    queues = run_with_store(database_url, lambda store: store.list_queues())
    table = Table(title=f"queues ({len(queues)})")
    table.add_column("queue")
    table.add_column("status")
    table.add_column("concurrency", justify="right")
    table.add_column("rate", justify="right")
    table.add_column("queued", justify="right")
    table.add_column("leased", justify="right")
    table.add_column("per key", justify="right")
    for q in queues:
        rate = ""
        if q.rate_limit is not None and q.rate_interval is not None:
            rate = f"{q.rate_limit}/{format_duration(q.rate_interval)}"
        table.add_row(
            q.name,
            "paused" if q.paused else "active",
            str(q.concurrency_limit) if q.concurrency_limit is not None else "",
            rate,
            str(q.queued),
            str(q.leased),
            str(q.key_limit) if q.key_limit is not None else "",
        )
    stdout.print(table)


@queues_app.command("pause")
def queues_pause_command(queue: QueueArgument, database_url: DatabaseUrlOption = None) -> None:
    """Stop every worker from claiming the queue's jobs; running jobs finish."""
    name = _checked_name(queue)
    _run_control(database_url, name, lambda store: store.pause_queue(name, actor=cli_actor()))
    typer.echo(f"queue {name!r} paused")


@queues_app.command("resume")
def queues_resume_command(queue: QueueArgument, database_url: DatabaseUrlOption = None) -> None:
    """Let workers claim the queue's jobs again."""
    name = _checked_name(queue)
    _run_control(database_url, name, lambda store: store.resume_queue(name, actor=cli_actor()))
    typer.echo(f"queue {name!r} resumed")


@queues_app.command("limit")
def queues_limit_command(
    queue: QueueArgument,
    database_url: DatabaseUrlOption = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            # Not JOBRUN_CONCURRENCY: that is the worker's own slot count.
            envvar="JOBRUN_QUEUE_CONCURRENCY",
            show_envvar=True,
            help="At most this many of the queue's jobs leased at once, fleet-wide.",
        ),
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option(
            envvar="JOBRUN_QUEUE_RATE",
            show_envvar=True,
            help="At most COUNT claims per INTERVAL, fleet-wide, e.g. 100/1s or 10/1m.",
        ),
    ] = None,
    per_key: Annotated[
        int | None,
        typer.Option(
            "--per-key",
            envvar="JOBRUN_QUEUE_PER_KEY",
            show_envvar=True,
            help="At most this many jobs of one concurrency key at once, for the queue's "
            "keyed jobs that give no limit of their own.",
        ),
    ] = None,
) -> None:
    """Limit the queue across every worker; a limit not given stays as it was."""
    name = _checked_name(queue)
    parsed = None
    if rate is not None:
        try:
            parsed = parse_rate(rate)
        except DurationError as exc:
            raise fail(f"--rate: {exc}") from None
    problem = queue_limits_problem(concurrency, parsed, per_key)
    if problem is not None:
        if concurrency is None and parsed is None and per_key is None:
            problem = "give --concurrency, --rate or both, or --per-key"
        raise fail(problem)
    controls = _run_control(
        database_url,
        name,
        lambda store: store.set_queue_limits(
            name, concurrency=concurrency, rate=parsed, key_limit=per_key, actor=cli_actor()
        ),
    )
    typer.echo(f"queue {name!r} limited: {_limits(controls)}")


@queues_app.command("unlimit")
def queues_unlimit_command(queue: QueueArgument, database_url: DatabaseUrlOption = None) -> None:
    """Remove the queue's concurrency limit, rate and limit per key; a pause stays."""
    name = _checked_name(queue)
    _run_control(
        database_url, name, lambda store: store.clear_queue_limits(name, actor=cli_actor())
    )
    typer.echo(f"queue {name!r} has no limits")


def drain_state(queue: QueueInfo | None) -> str:
    """What a paused queue's drain has come to: ``draining: N running`` or ``drained``."""
    running = queue.leased if queue is not None else 0
    return f"draining: {running} running" if running else "drained"


async def _running(store: Store, name: str) -> QueueInfo | None:
    return next((q for q in await store.list_queues() if q.name == name), None)


@queues_app.command("drain")
def queues_drain_command(
    queue: QueueArgument,
    database_url: DatabaseUrlOption = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait until none of its jobs runs any more.")
    ] = False,
) -> None:
    """Pause the queue and let its running jobs finish; say how many still run."""
    name = _checked_name(queue)

    async def drain(store: Store) -> str:
        await store.pause_queue(name, actor=cli_actor())
        info = await _running(store, name)
        while wait and info is not None and info.leased:
            typer.echo(f"queue {name!r} {drain_state(info)}")
            await asyncio.sleep(1.0)  # an operator's wait, polled
            info = await _running(store, name)
        return drain_state(info)

    typer.echo(f"queue {name!r} paused; {_run_control(database_url, name, drain)}")


@queues_app.command("clear")
def queues_clear_command(
    queue: QueueArgument,
    database_url: DatabaseUrlOption = None,
    confirm: Annotated[
        int | None,
        typer.Option(
            "--confirm",
            help="How many jobs the clear deletes, as a run without it said (a check "
            "that they are the ones you meant).",
        ),
    ] = None,
) -> None:
    """Delete the queue's jobs that are not running (queued, scheduled, waiting).

    Run it first without --confirm: it deletes nothing and says how many jobs
    it would delete; run it again with --confirm and that number.
    """
    name = _checked_name(queue)

    async def clear(store: Store) -> int | ConfirmationNeeded:
        try:
            return await store.clear_queue(name, confirm=confirm, actor=cli_actor())
        except ConfirmationNeeded as exc:
            return exc

    done = run_with_store(database_url, clear)
    if isinstance(done, ConfirmationNeeded):
        raise fail(
            f"queue {name!r} has {plural(done.count, 'job')} not running: "
            f"nothing was deleted; to delete them, run again with --confirm {done.count}"
        )
    typer.echo(f"queue {name!r} cleared: {plural(done, 'job')} deleted")
