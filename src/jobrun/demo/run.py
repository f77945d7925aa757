"""``jobrun demo``: every part of jobrun working together, in about half a minute.

What it does, in a queue of its own, on the database every other ``jobrun``
command uses: ``--database-url`` (or ``JOBRUN_DATABASE_URL``) as it is, else
the embedded server's database. That is what lets ``jobrun web`` (or ``jobrun
jobs list``), run afterwards with the same setting, show the demo's jobs; a
scratch database of its own would leave them where nothing else looks.

1. migrates, and creates the demo's ``demo_effects`` fixture table;
2. enqueues a batch of jobs in one ``enqueue_batch``: most succeed, some fail
   once or twice and succeed on retry, a few always fail and end ``dead``
   (three attempts, a short constant backoff), and one long job is cancelled
   while it runs;
3. adds an interval schedule that fires every 3 seconds, materialised by the
   leader-elected :class:`~jobrun.scheduler.Scheduler`;
4. runs ``--workers`` workers in this process, each started through its own
   :class:`~jobrun.client.Client` as a service would (its own pool, LISTEN
   connection, lease owner and scheduler candidate: one of them wins the
   leader election), with a live count of jobs per state;
5. prints a summary: jobs per final state, throughput, enqueue-to-start
   latency (job creation to its first ``claimed`` event, p50 and p99), and the
   number of effect rows written by commit callbacks next to the number of
   succeeded jobs that had one. Those must be equal: each effect commits
   exactly once, with its job.

:func:`run_demo` returns False (and the CLI exits 1) when the two numbers
differ or the demo does not finish in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from datetime import timedelta
from typing import Any
from uuid import UUID

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from jobrun._endings import plural
from jobrun.client import Client
from jobrun.demo.fixtures import (
    count_demo_effects,
    ensure_demo_effects_table,
    insert_demo_effect,
)
from jobrun.domain import (
    Backoff,
    BackoffKind,
    Job,
    JobFilter,
    JobState,
    NewJob,
    NewSchedule,
)
from jobrun.postgres import Pool, Store, database_location, embedded_database_url
from jobrun.registry import JobContext, Registry

__all__ = ["WORKER_CONCURRENCY", "build_registry", "percentile", "plan_jobs", "run_demo"]

WORKER_CONCURRENCY = 8
"""Jobs each demo worker runs at once."""

_BACKOFF = Backoff(
    kind=BackoffKind.CONSTANT, base=timedelta(milliseconds=500), max=timedelta(milliseconds=500)
)
_SCHEDULE_EVERY = timedelta(seconds=3)
_MIN_TICKS = 3
_DEADLINE = 90.0


def build_registry() -> Registry:
    """The demo's handlers, one per job type of the demo (``demo.work``, ``demo.tick``, ...)."""
    registry = Registry()

    @registry.handler("demo.work")
    async def work(ctx: JobContext, payload: Any) -> Any:
        """Sleep a little; with ``effect`` return a commit callback writing the effect row."""
        await asyncio.sleep(payload.get("ms", 100) / 1000)
        if not payload.get("effect"):
            return None
        job_id = ctx.job.id

        async def commit(conn: Any) -> None:
            await insert_demo_effect(conn, job_id)

        return commit

    @registry.handler("demo.flaky")
    async def flaky(ctx: JobContext, payload: Any) -> None:
        """Fail the first ``failures`` attempts, then succeed."""
        await asyncio.sleep(0.05)
        if ctx.attempt <= payload.get("failures", 1):
            raise RuntimeError(f"flaky failure on attempt {ctx.attempt}")

    @registry.handler("demo.doomed")
    async def doomed(ctx: JobContext, payload: Any) -> None:
        """Always fail: the job ends dead when its attempts run out."""
        raise RuntimeError(f"doomed job failed (attempt {ctx.attempt})")

    @registry.handler("demo.long")
    async def long(ctx: JobContext, payload: Any) -> None:
        """Run for a long time; the demo cancels it while it runs."""
        await asyncio.sleep(payload.get("seconds", 120))

    @registry.handler("demo.tick")
    async def tick(ctx: JobContext, payload: Any) -> None:
        """What the interval schedule runs: nothing much."""
        await asyncio.sleep(0.01)

    return registry


def plan_jobs(count: int, queue: str, seed: int = 7) -> list[NewJob]:
    """The demo's batch: one long job, ~5% doomed, ~15% flaky, the rest plain work.

    Every other plain job writes an effect row through its commit callback.
    """
    rng = random.Random(seed)
    doomed = max(1, count // 20)
    flaky = max(1, count * 15 // 100)
    plain = max(0, count - 1 - doomed - flaky)
    jobs = [
        NewJob(type="demo.long", payload={"seconds": 120}, queue=queue, priority=10, max_attempts=1)
    ]
    for i in range(plain):
        jobs.append(
            NewJob(
                type="demo.work",
                payload={"ms": rng.randint(20, 300), "effect": i % 2 == 0},
                queue=queue,
                max_attempts=3,
                backoff=_BACKOFF,
            )
        )
    for i in range(flaky):
        jobs.append(
            NewJob(
                type="demo.flaky",
                payload={"failures": 1 + i % 2},
                queue=queue,
                max_attempts=4,
                backoff=_BACKOFF,
            )
        )
    for _ in range(doomed):
        jobs.append(NewJob(type="demo.doomed", queue=queue, max_attempts=3, backoff=_BACKOFF))
    rng.shuffle(jobs[1:])
    return jobs


def percentile(values: list[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``values`` (nearest rank); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


async def _counts(store: Store, queue: str) -> Counter[JobState]:
    counts: Counter[JobState] = Counter()
    for depth in await store.depth():
        if depth.queue == queue:
            counts[depth.state] += depth.count
    return counts


async def _all_jobs(store: Store, queue: str) -> list[Job]:
    jobs: list[Job] = []
    cursor: UUID | None = None
    while True:
        page = await store.list_jobs(JobFilter(queue=queue), limit=500, cursor=cursor)
        jobs.extend(page.jobs)
        if page.next_cursor is None:
            return jobs
        cursor = page.next_cursor


def _progress(counts: Counter[JobState], elapsed: float, note: str) -> Group:
    table = Table(title="jobrun demo: jobs per state")
    for state in JobState:
        table.add_column(state.value, justify="right")
    table.add_row(*(str(counts.get(state, 0)) for state in JobState))
    return Group(table, Text(f"{elapsed:5.1f}s  {note}"))


async def _resolve(database_url: str | None, console: Console) -> str:
    if database_url:
        host, port, dbname = database_location(database_url)
        console.print(f"using the given database {dbname!r} at {host}:{port} as it is")
        return database_url
    url = await asyncio.to_thread(embedded_database_url)
    _, _, dbname = database_location(url)
    console.print(
        f"using the embedded PostgreSQL server's database {dbname!r} "
        "(what every jobrun command without --database-url uses)"
    )
    return url


async def run_demo(
    database_url: str | None, *, jobs: int = 200, workers: int = 3, console: Console
) -> bool:
    """Run the demo end to end and print its summary; True when every check held."""
    # The handlers' failures are the point of the demo: keep their log lines off the screen.
    logging.getLogger("jobrun").addHandler(logging.NullHandler())
    url = await _resolve(database_url, console)
    suffix = f"{int(time.time())}_{random.randrange(10_000):04d}"
    queue = f"demo_{suffix}"
    registry = build_registry()
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                Client(
                    registry,
                    database_url=url,
                    queues=[queue],
                    concurrency=WORKER_CONCURRENCY,
                    lease="6s",
                    heartbeat_every="1s",
                    poll="200ms",
                    shutdown_grace="5s",
                    reap_every="2s",
                    scheduler=True,
                    scheduler_tick="500ms",
                )
            )
            for _ in range(workers)
        ]
        # Never the URL itself: it may carry a password.
        dashboard = "jobrun web" + (" with the same --database-url" if database_url else "")
        return await _run(clients, queue, suffix, jobs=jobs, console=console, dashboard=dashboard)
    raise AssertionError("unreachable")  # pragma: no cover - the block returns


async def _run(
    clients: list[Client], queue: str, suffix: str, *, jobs: int, console: Console, dashboard: str
) -> bool:
    first = clients[0]
    applied = await first.migrate()
    console.print(f"migrated ({plural(len(applied), 'migration')} applied)")
    await ensure_demo_effects_table(first.pool)
    store = first.store
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(c.run_worker(stop=stop), name=f"demo-worker-{i}")
        for i, c in enumerate(clients)
    ]
    schedule_name = f"demo-tick-{suffix}"
    started = time.monotonic()
    try:
        planned = plan_jobs(jobs, queue)
        results = await store.enqueue_batch(planned)
        enqueued = [job for job in results if isinstance(job, Job)]
        long_id = planned[0].id
        console.print(
            f"enqueued {plural(len(enqueued), 'job')} in queue {queue!r} "
            f"with {plural(len(clients), 'worker')} x {WORKER_CONCURRENCY} slots"
        )
        await store.create_schedule(
            NewSchedule(
                name=schedule_name,
                type="demo.tick",
                queue=queue,
                every=_SCHEDULE_EVERY,
                max_attempts=3,
            )
        )
        console.print(f"schedule {schedule_name!r} fires every {_SCHEDULE_EVERY.seconds}s")
        finished = await _watch(store, queue, long_id, started, console)
    finally:
        with contextlib.suppress(Exception):
            await store.delete_schedule(schedule_name)
        # Jobs the last tick made: let them finish before the workers stop.
        with contextlib.suppress(Exception):
            await _settle(store, queue, started)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    elapsed = time.monotonic() - started
    ok = await _summary(store, first.pool, queue, elapsed, finished, console)
    console.print(f"see these jobs in the dashboard: {dashboard} (queue {queue!r})")
    return ok


async def _ticks(store: Store, queue: str) -> int:
    page = await store.list_jobs(JobFilter(queue=queue, type="demo.tick"), limit=500)
    return len(page.jobs)


async def _watch(
    store: Store,
    queue: str,
    long_id: UUID,
    started: float,
    console: Console,
) -> bool:
    """Show live counts until every job is final and the schedule fired enough; True if so."""
    cancel_sent = False
    note = "working"
    live = Live(console=console, refresh_per_second=8, transient=False)
    live.start()
    try:
        while True:
            elapsed = time.monotonic() - started
            counts = await _counts(store, queue)
            if not cancel_sent:
                long_job = await store.get(long_id)
                if long_job.state is JobState.LEASED:
                    await store.cancel(long_id)
                    cancel_sent = True
                    note = f"cancel requested for the long job {long_id}"
            ticks = await _ticks(store, queue)
            live.update(_progress(counts, elapsed, f"{note}; schedule fired {ticks}x"))
            busy = counts.get(JobState.QUEUED, 0) + counts.get(JobState.LEASED, 0)
            if cancel_sent and busy == 0 and ticks >= _MIN_TICKS:
                return True
            if elapsed > _DEADLINE:
                note = "deadline passed: stopping"
                live.update(_progress(counts, elapsed, note))
                return False
            await asyncio.sleep(0.25)
    finally:
        live.stop()
        console.print()


async def _settle(store: Store, queue: str, started: float) -> None:
    while time.monotonic() - started < _DEADLINE + 10:
        counts = await _counts(store, queue)
        if counts.get(JobState.QUEUED, 0) + counts.get(JobState.LEASED, 0) == 0:
            return
        await asyncio.sleep(0.2)


async def _summary(
    store: Store, pool: Pool, queue: str, elapsed: float, finished: bool, console: Console
) -> bool:
    jobs = await _all_jobs(store, queue)
    states = Counter(job.state for job in jobs)
    latencies: list[float] = []
    for job in jobs:
        claims = [e.at for e in await store.events(job.id) if e.kind == "claimed"]
        if claims:
            # Every demo job is due when it is created (scheduled ones are
            # created when their run is due); run_at is no reference, since a
            # retry moves it past the first claim.
            latencies.append((min(claims) - job.created_at).total_seconds())
    with_effect = [
        job.id
        for job in jobs
        if job.type == "demo.work"
        and isinstance(job.payload, dict)
        and job.payload.get("effect") is True
    ]
    succeeded_with_effect = sum(
        1 for job in jobs if job.id in set(with_effect) and job.state is JobState.SUCCEEDED
    )
    effect_rows = await count_demo_effects(pool, with_effect)
    # Throughput of the enqueued batch: the schedule's jobs trickle in on their own clock.
    batch = [job for job in jobs if job.type != "demo.tick"]
    ends = [job.finished_at for job in batch if job.finished_at is not None]
    span = max(ends) - min(job.created_at for job in batch) if ends else timedelta(0)
    throughput = len(ends) / span.total_seconds() if span > timedelta(0) else 0.0

    table = Table(title="jobrun demo: summary")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for state in JobState:
        table.add_row(f"jobs {state.value}", str(states.get(state, 0)))
    table.add_row("jobs in total", str(len(jobs)))
    by_type = Counter(job.type for job in jobs)
    table.add_row("scheduled jobs (demo.tick)", str(by_type.get("demo.tick", 0)))
    table.add_row("wall time", f"{elapsed:.1f}s")
    table.add_row("batch throughput (finished jobs/s)", f"{throughput:.1f}")
    table.add_row("enqueue-to-start latency p50", f"{percentile(latencies, 0.5) * 1000:.0f} ms")
    table.add_row("enqueue-to-start latency p99", f"{percentile(latencies, 0.99) * 1000:.0f} ms")
    table.add_row("effect rows written", str(effect_rows))
    table.add_row("succeeded jobs with an effect", str(succeeded_with_effect))
    match = effect_rows == succeeded_with_effect
    table.add_row("effects match", "yes" if match else "NO")
    console.print(table)
    return finished and match
