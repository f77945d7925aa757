"""One scenario suite, two stores: the SQLite laboratory and PostgreSQL on jobrun.

Each test runs once per store and checks the behaviour the migration must
preserve: uniqueness on (node, request id), immutable digests, one decision
with its original expiry, retries and replays that count once, crashes before
and after commit, out-of-order events in a rolling window, and a crash at the
boundary between unsigned intent and signed delivery.

Processing order. The lab runs its jobs one at a time, oldest first. jobrun
promises no such order, even at ``concurrency=1``: a worker claims and runs the
next job while the previous one's completion (its commit callback, where the
counting happens) is still committing, and two completion batches may commit
at once. Which of several events on one key is counted last, and so which one
crosses a threshold (the decision's event, time and expiry), therefore depends
on timing on PostgreSQL. That is the window model's policy (a late event
decides when it is counted), not a storage difference. A scenario that pins the
deciding event feeds its events one at a time (ingest, then process), so both
stores see the same order and must agree exactly; the others hold whatever
the order.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from detector.domain import RULES, DigestConflict, EventIn, shared_key
from detector.lab import LabDetector, Q
from detector.port import DetectorStore, Snapshot
from detector.postgres import PgDetector
from detector.service import accept
from detector.signing import Signer, generate_seed, verify

T0 = 1_700_000_000_000
V1 = RULES["v1"]  # 5 hits in 60 s
V2 = RULES["v2"]  # 3 hits in 10 s


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class Agents:
    """In-process agents: verify each snapshot's signature and revision order."""

    def __init__(self, signer: Signer) -> None:
        self.public_key = signer.public_key
        self.received: list[tuple[str, int, bytes]] = []
        self.latest: dict[str, int] = {}
        self.bad_signatures = 0
        self.fail_next = 0

    async def __call__(self, endpoint: str, snapshot: Snapshot) -> int:
        if self.fail_next > 0:
            self.fail_next -= 1
            return 503
        assert snapshot.signature is not None
        if not verify(self.public_key, snapshot.body, snapshot.signature):
            self.bad_signatures += 1
            return 400
        self.received.append((endpoint, snapshot.revision, snapshot.body))
        if snapshot.revision <= self.latest.get(endpoint, 0):
            return 409
        self.latest[endpoint] = snapshot.revision
        return 200


@pytest.fixture(params=["lab", "pg"])
async def env(request: Any, tmp_path: Path) -> AsyncIterator[tuple[DetectorStore, Clock, Agents]]:
    clock = Clock()
    signer = Signer(generate_seed())
    agents = Agents(signer)
    store: Any
    if request.param == "lab":
        store = LabDetector(tmp_path / "lab.db", signer=signer, send=agents, clock=clock)
    else:
        url = request.getfixturevalue("detector_db")
        # One handler at a time (the race test covers concurrency); see the module
        # docstring for why that is still not the lab's strict order.
        store = PgDetector(url, signer=signer, send=agents, clock=clock, concurrency=1)
    async with store:
        yield store, clock, agents


def ev(
    n: int, *, at: int, address: str = "10.0.0.1", rule: str = "v1", site: str = "s1"
) -> EventIn:
    return EventIn(
        request_id=f"r{n}", site=site, address=address, rule_version=rule, occurred_ms=at
    )


async def ingest_all(
    store: DetectorStore,
    clock: Clock,
    events: list[EventIn],
    node: str = "n1",
    *,
    one_by_one: bool = False,
) -> None:
    """Ingest ``events``; ``one_by_one`` processes each before the next (a fixed order)."""
    for e in events:
        await accept(store, node, e, now_ms=clock())
        if one_by_one:
            await store.process()


async def test_replay_returns_the_stored_result_and_enqueues_no_second_job(env: Any) -> None:
    store, _clock, _ = env
    first = await accept(store, "n1", ev(1, at=T0), now_ms=T0)
    again = await accept(store, "n1", ev(1, at=T0), now_ms=T0 + 5)
    assert not first.replay and again.replay
    assert (again.event_id, again.digest) == (first.event_id, first.digest)
    assert await store.pending_jobs() == 1
    other_node = await accept(store, "n2", ev(1, at=T0), now_ms=T0)  # same request id, other node
    assert not other_node.replay and other_node.event_id != first.event_id
    await store.process()
    state = await store.state()
    assert state["counters"] == {shared_key("s1", "10.0.0.1", V1): 2}


async def test_same_request_with_another_digest_conflicts_and_writes_nothing(env: Any) -> None:
    store, _, _ = env
    await accept(store, "n1", ev(1, at=T0), now_ms=T0)
    with pytest.raises(DigestConflict):
        await accept(store, "n1", ev(1, at=T0 + 1), now_ms=T0)
    state = await store.state()
    assert len(state["events"]) == 1 and state["events"][0][3] == T0
    assert await store.pending_jobs() == 1


async def test_unknown_rule_and_stale_events_are_refused_before_any_write(env: Any) -> None:
    store, _, _ = env
    with pytest.raises(ValueError, match="unknown rule"):
        await accept(store, "n1", ev(1, at=T0, rule="v9"), now_ms=T0)
    with pytest.raises(ValueError, match="freshness"):
        await accept(store, "n1", ev(2, at=T0 - 10 * 60_000), now_ms=T0)
    with pytest.raises(ValueError, match="future"):
        await accept(store, "n1", ev(3, at=T0 + 10 * 60_000), now_ms=T0)
    assert (await store.state())["events"] == []
    assert await store.pending_jobs() == 0


async def test_threshold_decides_once_and_keeps_its_expiry_on_replay(env: Any) -> None:
    store, clock, agents = env
    await store.add_agent("a1", "http://agent-1")
    # One by one: the fifth event counted decides, and this pins it to r4.
    await ingest_all(store, clock, [ev(i, at=T0 + i * 1000) for i in range(7)], one_by_one=True)
    state = await store.state()
    assert state["counters"] == {shared_key("s1", "10.0.0.1", V1): 7}
    expected = [("s1", "10.0.0.1", "v1", ("n1", "r4"), T0 + 4000, T0 + 4000 + V1.ban_ms)]
    assert state["decisions"] == expected
    # Replays and duplicate deliveries (every job again) change nothing.
    clock.now += 30_000
    await ingest_all(store, clock, [ev(i, at=T0 + i * 1000) for i in range(7)])
    for event_id in range(1, 8):
        await store.redeliver(event_id)
    await store.process()
    again = await store.state()
    assert again["counters"] == state["counters"]
    assert again["decisions"] == expected
    assert [(r[0], r[1]) for r in agents.received] == [("http://agent-1", 1)]


async def test_a_crash_before_commit_loses_and_repeats_nothing(env: Any) -> None:
    store, clock, _ = env
    store.faults.crash_in_detection_commit = 3
    await ingest_all(store, clock, [ev(i, at=T0 + i) for i in range(6)])
    await store.process()
    state = await store.state()
    assert store.faults.fired == ["crash_in_detection_commit"] * 3
    assert state["counters"] == {shared_key("s1", "10.0.0.1", V1): 6}
    assert len(state["decisions"]) == 1


async def test_a_rolling_window_sees_a_burst_split_across_a_boundary(env: Any) -> None:
    store, clock, _ = env
    # v2: 3 hits in 10 s. 9.9 s, 10.1 s and 10.2 s fall in two fixed 10 s buckets.
    base = (T0 // 10_000) * 10_000
    await ingest_all(store, clock, [ev(i, at=base + t) for i, t in enumerate((-100, 100, 200))])
    # Three hits spread wider than the window decide nothing.
    spread = [ev(10 + i, at=base + i * 6000, address="10.0.0.2", rule="v2") for i in range(3)]
    burst = [ev(20 + i, at=base + t, rule="v2") for i, t in enumerate((-100, 100, 200))]
    await ingest_all(store, clock, spread + burst)
    await store.process()
    decisions = (await store.state())["decisions"]
    assert [(d[1], d[2]) for d in decisions] == [("10.0.0.1", "v2")]


async def test_a_late_event_that_completes_a_burst_decides_when_it_arrives(env: Any) -> None:
    store, clock, _ = env
    await ingest_all(store, clock, [ev(1, at=T0, rule="v2"), ev(2, at=T0 + 8000, rule="v2")])
    await store.process()
    assert (await store.state())["decisions"] == []
    await ingest_all(store, clock, [ev(3, at=T0 + 4000, rule="v2")])  # arrives late
    await store.process()
    decisions = (await store.state())["decisions"]
    assert [(d[3], d[4], d[5]) for d in decisions] == [
        (("n1", "r3"), T0 + 4000, T0 + 4000 + V2.ban_ms)
    ]


async def test_a_crash_between_allocation_and_signing_sends_the_stored_bytes_once(env: Any) -> None:
    store, clock, agents = env
    await store.add_agent("a1", "http://agent-1")
    store.faults.crash_after_allocation = 1
    await ingest_all(store, clock, [ev(i, at=T0 + i, rule="v2") for i in range(3)])
    await store.process()
    state = await store.state()
    assert store.faults.fired == ["crash_after_allocation"]
    assert state["snapshots"] == [("a1", 1, True, True)]
    assert [(r[1], r[2]) for r in agents.received] == [(1, state["snapshot_bodies"][("a1", 1)])]
    assert agents.bad_signatures == 0


async def test_a_crash_after_the_agent_accepted_resends_identical_bytes(env: Any) -> None:
    store, clock, agents = env
    await store.add_agent("a1", "http://agent-1")
    store.faults.crash_after_send = 1
    agents.fail_next = 2  # the agent is briefly down too: fresh bytes are retried as they are
    await ingest_all(store, clock, [ev(i, at=T0 + i, rule="v2") for i in range(3)])
    await store.process()
    state = await store.state()
    assert state["snapshots"] == [("a1", 1, True, True)]
    assert [r[1] for r in agents.received] == [1, 1]
    assert agents.received[0][2] == agents.received[1][2]


async def test_a_lost_delivery_job_is_repaired_by_the_durable_scan(env: Any) -> None:
    store, clock, agents = env
    await store.add_agent("a1", "http://agent-1")
    await store.add_agent("a2", "http://agent-2")
    store.faults.abandon_after_allocation = 1
    await ingest_all(store, clock, [ev(i, at=T0 + i, rule="v2") for i in range(3)])
    await store.process()
    state = await store.state()
    assert sorted(s[2] for s in state["snapshots"]) == [False, True]  # one left unsigned
    assert await store.scan() == 1  # the unsigned snapshot is found in the rows
    await store.process()
    state = await store.state()
    assert sorted(state["snapshots"]) == [("a1", 1, True, True), ("a2", 1, True, True)]
    assert sorted(r[:2] for r in agents.received) == [("http://agent-1", 1), ("http://agent-2", 1)]
    assert await store.scan() == 0


async def test_a_stale_unsent_snapshot_is_re_derived_under_a_new_revision(env: Any) -> None:
    store, clock, agents = env
    await store.add_agent("a1", "http://agent-1")
    store.faults.abandon_after_allocation = 1
    await ingest_all(store, clock, [ev(i, at=T0 + i, rule="v2") for i in range(3)])
    await store.process()
    clock.now += 120_000  # past SNAPSHOT_FRESH_MS: the stored bytes are too old to send
    await store.scan()
    await store.process()
    state = await store.state()
    assert [s[:2] for s in state["snapshots"]] == [("a1", 1), ("a1", 2)]
    assert [r[1] for r in agents.received] == [2]


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def cross_store_events() -> list[EventIn]:
    # Ten events on each of three addresses (v1), and four events of one v2
    # burst a millisecond apart: which of those is counted third decides.
    events = [ev(i, at=T0 + i * 700, address=f"10.0.0.{i % 3}") for i in range(30)]
    return events + [ev(100 + i, at=T0 + i, rule="v2", site="s2") for i in range(4)]


async def run_on_both(
    tmp_path: Path, url: str, *, one_by_one: bool
) -> list[tuple[dict[str, Any], Agents]]:
    """The same scenario on the lab and on PostgreSQL: events, replays, a second node."""
    seed = generate_seed()
    runs = []
    for kind in ("lab", "pg"):
        clock = Clock()
        signer = Signer(seed)
        agents = Agents(signer)
        store: Any = (
            LabDetector(tmp_path / "same.db", signer=signer, send=agents, clock=clock)
            if kind == "lab"
            else PgDetector(url, signer=signer, send=agents, clock=clock, concurrency=1)
        )
        async with store:
            await store.add_agent("a1", "http://agent-1")
            events = cross_store_events()
            await ingest_all(store, clock, events, one_by_one=one_by_one)
            await ingest_all(store, clock, events[:8])  # replays: no job, no change
            await ingest_all(store, clock, events[:5], node="n2", one_by_one=one_by_one)
            await store.process()
            runs.append((await store.state(), agents))
    return runs


async def test_both_stores_end_in_the_same_state(
    tmp_path: Path, detector_db: str, coverage_gaps: Any
) -> None:
    # Fed one event at a time, both stores count in the same order, so every
    # row must match: events and digests, counters, each decision with the
    # event that made it and its expiry, intents, revisions and the exact bytes.
    (lab, lab_agents), (pg, pg_agents) = await run_on_both(tmp_path, detector_db, one_by_one=True)
    assert pg == lab
    assert pg_agents.received == lab_agents.received
    assert len(pg["decisions"]) == 4
    assert ("s2", "10.0.0.1", "v2", ("n1", "r102"), T0 + 2, T0 + 2 + V2.ban_ms) in pg["decisions"]
    assert [s[1] for s in pg["snapshots"]] == [1, 2, 3, 4]  # one revision per decision
    assert coverage_gaps(pg) == []
    assert len(json.loads(pg_agents.received[-1][2])["decisions"]) == 4


async def test_both_stores_agree_on_what_processing_order_cannot_change(
    tmp_path: Path, detector_db: str, coverage_gaps: Any
) -> None:
    # Fed in batches, PostgreSQL may count same-key events in another order than
    # the lab (see the module docstring). What must still match: event
    # uniqueness and digests, exact counters, one decision per target whose
    # expiry is its own event's time plus the rule's ban, intents all covered,
    # revisions without gaps, and the agent ends holding every decision in force.
    runs = await run_on_both(tmp_path, detector_db, one_by_one=False)
    views = []
    for state, agents in runs:
        occurred = {(e[0], e[1]): e[3] for e in state["events"]}
        for _site, _address, rule, event_key, decided_ms, expires_ms in state["decisions"]:
            assert decided_ms == occurred[event_key]
            assert expires_ms == decided_ms + RULES[rule].ban_ms
        revisions = [s[1] for s in state["snapshots"]]
        assert revisions == list(range(1, len(revisions) + 1))
        assert coverage_gaps(state) == []
        in_force = sorted(
            (
                {"site": d[0], "address": d[1], "rule_version": d[2], "expires_ms": d[5]}
                for d in state["decisions"]
            ),
            key=canonical,
        )
        last = json.loads(agents.received[-1][2])["decisions"]
        assert sorted(last, key=canonical) == in_force
        views.append(
            (
                state["events"],
                state["counters"],
                sorted(d[:3] for d in state["decisions"]),
                state["intents"],
            )
        )
    assert views[0] == views[1]
    assert len(views[0][2]) == 4


async def test_event_digests_cannot_be_rewritten(tmp_path: Path, detector_db: str) -> None:
    signer = Signer(generate_seed())
    async with LabDetector(tmp_path / "lab.db", signer=signer, clock=Clock()) as lab:
        await accept(lab, "n1", ev(1, at=T0), now_ms=T0)
        with pytest.raises(Exception, match="immutable"):
            lab.conn.execute(Q["event_digest_rewrite"], {"digest": "0" * 64, "id": 1})
    from detector.sqlc import events as events_q

    async with PgDetector(detector_db, signer=signer, clock=Clock()) as pg:
        await accept(pg, "n1", ev(1, at=T0), now_ms=T0)
        async with pg.pool.connection() as conn:
            with pytest.raises(psycopg.errors.RaiseException, match="immutable"):
                await events_q.AsyncQuerier(conn).event_digest_rewrite(digest="0" * 64, id=1)
