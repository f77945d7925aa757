"""``detector migrate-from-sqlite``: move a laboratory into PostgreSQL without changing it.

Everything is copied in one PostgreSQL transaction, so a failure leaves the
target as it was: events with their stored digests (copied, never
recomputed, and checked against the canonical event), counted hits, counters,
decisions with their original expiries, agents with their last revision,
delivery intent, stored snapshots (bytes and signatures), and every lab job
not done, which becomes a jobrun job enqueued in that same transaction.

It refuses a target that already holds detector events (a second run, or
someone else's data) unless ``force`` is given; forced, events already
present with the same digest are kept and nothing else is duplicated. After
the commit it verifies counts and every digest and expiry against the lab.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from detector.domain import EventIn, canonical_event
from detector.lab import Q
from detector.postgres import _deliver_job, _detect_job, migrate_detector
from detector.sqlc import delivery as delivery_q
from detector.sqlc import detection as detection_q
from detector.sqlc import events as events_q
from jobrun.postgres import Pool, Store, open_pool

__all__ = ["MigrationRefused", "MigrationReport", "migrate_from_sqlite"]


class MigrationRefused(Exception):
    """The target is not empty (or the lab is not a lab), and ``force`` was not given."""


@dataclass
class MigrationReport:
    """What was copied and what the verification found."""

    events: int = 0
    decisions: int = 0
    intents: int = 0
    snapshots: int = 0
    jobs: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """True when every count, digest and expiry matched."""
        return not self.mismatches

    def summary(self) -> str:
        """One line per figure, then the verdict."""
        lines = [
            f"events     {self.events}",
            f"decisions  {self.decisions}",
            f"intents    {self.intents}",
            f"snapshots  {self.snapshots}",
            f"jobs       {self.jobs}",
            "verified   " + ("yes" if self.verified else "NO: " + "; ".join(self.mismatches[:5])),
        ]
        return "\n".join(lines)


def _digest_ok(row: sqlite3.Row) -> bool:
    event = EventIn(
        request_id=row["request_id"],
        site=row["site"],
        address=row["address"],
        rule_version=row["rule_version"],
        occurred_ms=row["occurred_ms"],
    )
    digest: str = row["digest"]
    return hashlib.sha256(canonical_event(row["node_id"], event)).hexdigest() == digest


async def migrate_from_sqlite(
    lab_path: str | Path, database_url: str, *, force: bool = False
) -> MigrationReport:
    """Copy the lab at ``lab_path`` into ``database_url``; verify; return the report."""
    if not Path(lab_path).is_file():  # noqa: ASYNC240 (one stat before any work)
        raise MigrationRefused(f"{lab_path}: no such laboratory file")
    lab = sqlite3.connect(f"file:{lab_path}?mode=ro", uri=True)
    lab.row_factory = sqlite3.Row
    report = MigrationReport()
    pool = await open_pool(database_url, worker_concurrency=1)
    try:
        await migrate_detector(pool)
        store = Store(pool)
        events = lab.execute(Q["event_list"]).fetchall()
        bad = [e["id"] for e in events if not _digest_ok(e)]
        if bad:
            raise MigrationRefused(f"lab events {bad[:5]} do not match their stored digests")
        async with pool.connection() as conn, conn.transaction():
            eq = events_q.AsyncQuerier(conn)
            if (await eq.event_count() or 0) > 0 and not force:
                raise MigrationRefused(
                    "the target database already holds detector events "
                    "(migrated before?); use --force to copy into it anyway"
                )
            dq = detection_q.AsyncQuerier(conn)
            lq = delivery_q.AsyncQuerier(conn)
            ids: dict[int, int] = {}
            fresh: set[int] = set()
            for e in events:
                new_id = await eq.event_insert(
                    params=events_q.EventInsertParams(
                        **{k: e[k] for k in events_q.EventInsertParams.__annotations__}
                    )
                )
                if new_id is None:
                    found = await eq.event_by_replay_key(
                        node_id=e["node_id"], request_id=e["request_id"]
                    )
                    assert found is not None
                    if found.digest != e["digest"]:
                        raise MigrationRefused(
                            f"event {e['node_id']}/{e['request_id']} differs in the target"
                        )
                    ids[e["id"]] = found.id
                    continue
                ids[e["id"]] = new_id
                fresh.add(e["id"])
                report.events += 1
            # A counter is the number of its key's hits (the lab's invariant), so
            # the copied hits, not the lab's counters, say what to add.
            added: dict[str, int] = {}
            for h in lab.execute(Q["hit_list"]).fetchall():
                if h["event_id"] in fresh:
                    await dq.hit_insert(
                        event_id=ids[h["event_id"]], key=h["key"], occurred_ms=h["occurred_ms"]
                    )
                    added[h["key"]] = added.get(h["key"], 0) + 1
            for key, hits in added.items():
                await dq.counter_set(key=key, hits=(await dq.counter_get(key=key) or 0) + hits)
            for a in lab.execute(Q["agent_list"]).fetchall():
                await lq.agent_upsert(agent_id=a["agent_id"], endpoint=a["endpoint"])
                await lq.agent_revision_import(revision=a["revision"], agent_id=a["agent_id"])
            decisions: dict[int, int] = {}
            for d in lab.execute(Q["decision_list"]).fetchall():
                if d["event_id"] not in fresh:
                    continue
                new = await dq.decision_import(
                    params=detection_q.DecisionImportParams(
                        site=d["site"],
                        address=d["address"],
                        rule_version=d["rule_version"],
                        event_id=ids[d["event_id"]],
                        decided_ms=d["decided_ms"],
                        expires_ms=d["expires_ms"],
                    )
                )
                assert new is not None
                decisions[d["id"]] = new
                report.decisions += 1
            for i in lab.execute(Q["intent_list"]).fetchall():
                if i["decision_id"] in decisions:
                    await lq.intent_import(
                        decision_id=decisions[i["decision_id"]],
                        agent_id=i["agent_id"],
                        created_ms=i["created_ms"],
                        snapshot_revision=i["snapshot_revision"],
                    )
                    report.intents += 1
            for s in lab.execute(Q["snapshot_list"]).fetchall():
                if report.events == 0:
                    break  # forced re-run: the snapshots are already there
                await lq.snapshot_import(
                    params=delivery_q.SnapshotImportParams(
                        agent_id=s["agent_id"],
                        revision=s["revision"],
                        body=bytes(s["body"]),
                        signature=None if s["signature"] is None else bytes(s["signature"]),
                        created_ms=s["created_ms"],
                        delivered_ms=s["delivered_ms"],
                        superseded=bool(s["superseded"]),
                    )
                )
                report.snapshots += 1
            for j in lab.execute(Q["job_list_pending"]).fetchall():
                if j["kind"] == "detect" and int(j["ref"]) not in fresh:
                    continue
                if j["kind"] == "detect":
                    await store.enqueue(_detect_job(ids[int(j["ref"])]), conn=conn)
                else:
                    await store.enqueue(_deliver_job(j["ref"], None), conn=conn)
                report.jobs += 1
        await _verify(lab, pool, ids, report)
    finally:
        await pool.close()
        lab.close()
    return report


async def _verify(
    lab: sqlite3.Connection, pool: Pool, ids: dict[int, int], report: MigrationReport
) -> None:
    async with pool.connection() as conn:
        stored = {e.id: e for e in await events_q.AsyncQuerier(conn).event_list()}
        target_decisions = await detection_q.AsyncQuerier(conn).decision_list()
    for e in lab.execute(Q["event_list"]).fetchall():
        got = stored.get(ids[e["id"]])
        if got is None or got.digest != e["digest"] or got.occurred_ms != e["occurred_ms"]:
            report.mismatches.append(f"event {e['node_id']}/{e['request_id']}")
    by_event = {d.event_id: d for d in target_decisions}
    lab_decisions = lab.execute(Q["decision_list"]).fetchall()
    for d in lab_decisions:
        got_d = by_event.get(ids[d["event_id"]])
        if got_d is None or (got_d.decided_ms, got_d.expires_ms) != (
            d["decided_ms"],
            d["expires_ms"],
        ):
            report.mismatches.append(f"decision of event {d['event_id']}")
    if len(stored) < len(ids):
        report.mismatches.append(f"{len(stored)} events in the target, {len(ids)} in the lab")
