"""``jobrun stats`` as a user runs it: every state's totals, and one format for lag.

Once a queue drained, the command used to print an empty table (it counted
only queued and leased jobs), and it printed lag as ``8.47734s`` and
``26.4719s`` side by side with ``1m30s``.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from tests.acceptance.test_cli import ok

from jobrun import Client
from jobrun.domain import NewJob, Outcome, OutcomeKind

LAG = re.compile(r"\d+\.\ds|\d+m \d\ds|\d+h \d\dm|\d+d \d\dh")
LEASE = timedelta(minutes=1)


def rows(output: str) -> dict[str, list[str]]:
    """The stats table's rows by queue; the header's cells under the key "queue"."""
    found = {}
    for line in output.splitlines():
        cells = [c.strip() for c in re.split("[│┃]", line)[1:-1]]
        if cells:
            found[cells[0]] = cells[1:]
    return found


async def settle(db_url: str) -> None:
    """Queue "done": 2 succeeded, 1 dead, 1 cancelled; queue "late": 1 job due 125 s ago."""
    async with Client(database_url=db_url) as client:
        store = client.store
        await store.enqueue(NewJob(type="t", queue="done"))
        await store.enqueue(NewJob(type="t", queue="done"))
        await store.enqueue(NewJob(type="t", queue="done", max_attempts=1))
        cancelled = await store.enqueue(NewJob(type="t", queue="done"))
        await store.cancel(cancelled.id)
        claimed = await store.claim(["done"], "w", 10, LEASE)
        assert len(claimed) == 3
        outcomes = [
            Outcome(
                job=job, kind=OutcomeKind.FAIL if job.max_attempts == 1 else OutcomeKind.COMPLETE
            )
            for job in claimed
        ]
        await store.record_outcomes("w", outcomes)
        now = await store.now()
        await store.enqueue(NewJob(type="t", queue="late", run_at=now - timedelta(seconds=125)))


def test_stats_shows_every_states_totals_once_a_queue_drained(db_url: str) -> None:
    asyncio.run(settle(db_url))
    table = rows(ok("stats", "--database-url", db_url))
    assert table["queue"] == [
        "queued", "due", "leased", "succeeded", "dead", "cancelled", "lag",
    ]  # fmt: skip
    # Drained: nothing waits or runs, and what became of its jobs is shown.
    assert table["done"] == ["0", "0", "0", "2", "1", "1", "-"]
    late = table["late"]
    assert late[:6] == ["1", "1", "0", "0", "0", "0"]
    # About 2m 05s, in the one format every lag is printed in.
    assert LAG.fullmatch(late[6]) and late[6].startswith("2m "), late
