"""The confirmer's bookkeeping without a database: whom it confirms, when, and what it retries.

The store is a stand-in that records the heartbeats it is asked for; that a
heartbeat confirms a handed job under the lease fence, and that a worker whose
listener dropped loses its handed job to another worker within seconds, is
tested on PostgreSQL (tests/integration/test_handoff.py,
tests/acceptance/test_cli_handoff.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from uuid import UUID

from tests.unit.test_worker_logic import RecordingStore, make_job

from jobrun._confirm import HandoffConfirmer
from jobrun.domain import Job
from jobrun.testing import eventually

WITHIN = timedelta(milliseconds=300)


class Heartbeats(RecordingStore):
    """Records every heartbeat; fails the first ``failures``; keeps all but ``refused``."""

    def __init__(self, failures: int = 0, refused: frozenset[UUID] = frozenset()) -> None:
        super().__init__()
        self.failures = failures
        self.refused = refused
        self.sent: list[list[UUID]] = []
        self.called = asyncio.Event()

    async def heartbeat(
        self,
        owner: str,
        jobs: Sequence[Job],
        lease: timedelta,
        *,
        progress: Sequence[tuple[Job, float, str]] = (),
    ) -> set[UUID]:
        self.sent.append([j.id for j in jobs])
        self.called.set()
        if self.failures:
            self.failures -= 1
            raise ConnectionError("server closed the connection")
        return {j.id for j in jobs} - self.refused


@asynccontextmanager
async def confirming(
    store: Heartbeats, held: set[UUID], lost: list[Job]
) -> AsyncIterator[HandoffConfirmer]:
    confirmer = HandoffConfirmer(
        store,  # type: ignore[arg-type]
        "w",
        lease=timedelta(seconds=30),
        within=WITHIN,
        held=lambda job: job.id in held,
        lost=lost.append,
        logger=logging.getLogger("test"),
    )
    task = asyncio.create_task(confirmer.run())
    try:
        yield confirmer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def next_heartbeat(store: Heartbeats) -> list[UUID]:
    store.called.clear()
    await asyncio.wait_for(store.called.wait(), 5)
    return store.sent[-1]


async def test_only_handed_jobs_still_held_are_confirmed_in_one_heartbeat() -> None:
    store = Heartbeats()
    running, finished = make_job(), make_job()
    lost: list[Job] = []
    async with confirming(store, {running.id}, lost) as confirmer:
        confirmer.add(running)
        confirmer.add(finished)  # its run ended before its confirmation was due
        assert await next_heartbeat(store) == [running.id]
    assert store.sent == [[running.id]]
    assert lost == []


async def test_a_refused_confirmation_is_reported_lost() -> None:
    taken = make_job()
    store = Heartbeats(refused=frozenset({taken.id}))
    lost: list[Job] = []
    async with confirming(store, {taken.id}, lost) as confirmer:
        confirmer.add(taken)
        await next_heartbeat(store)
        await eventually(lambda: lost, what="the job reported lost")
    assert lost == [taken]


async def test_a_failed_confirmation_is_tried_again_while_the_short_lease_lasts() -> None:
    job = make_job()
    store = Heartbeats(failures=1)
    lost: list[Job] = []
    async with confirming(store, {job.id}, lost) as confirmer:
        confirmer.add(job)
        assert await next_heartbeat(store) == [job.id]  # fails
        assert await next_heartbeat(store) == [job.id]  # again, and kept
    assert lost == []
