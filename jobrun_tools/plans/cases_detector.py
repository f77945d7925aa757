"""The cases of the detector's queries (see :mod:`jobrun_tools.plans.cases`).

The detector is an application on jobrun with queries of its own; its cases
live here, beside jobrun's, as a user's would beside theirs.
"""

from __future__ import annotations

from detector.sqlc import delivery, detection, events
from jobrun_tools.plans.capture import recording
from jobrun_tools.plans.cases import Case, Facts

__all__ = ["cases"]

_AGENT = "agent-3"
_BODY = b"ban;" * 64


def cases(f: Facts) -> dict[str, list[Case]]:
    """The cases of every query of the detector."""
    conn = recording()
    d = delivery.Querier(conn)
    t = detection.Querier(conn)
    ev = events.Querier(conn)
    fact = f.detector
    now_ms = f.now_ms
    decision = detection.DecisionInsertParams(
        site=fact.site,
        address=fact.address,
        rule_version=fact.rule_version,
        event_id=4,
        decided_ms=now_ms,
        expires_ms=now_ms + 3_600_000,
    )
    return {
        "AgentUpsert": [
            Case(
                "known",
                "an agent already registered",
                lambda g: d.agent_upsert(agent_id=_AGENT, endpoint="https://agent-3.example/bans"),
            )
        ],
        "AgentList": [Case("all", "every agent", lambda g: d.agent_list())],
        "AgentGet": [Case("one", "one agent", lambda g: d.agent_get(agent_id=_AGENT))],
        "AgentRevisionNext": [
            Case(
                "one", "one agent's next revision", lambda g: d.agent_revision_next(agent_id=_AGENT)
            )
        ],
        "AgentRevisionImport": [
            Case(
                "one",
                "one agent",
                lambda g: d.agent_revision_import(revision=1000, agent_id=_AGENT),
            )
        ],
        "IntentInsertForAll": [
            Case(
                "decision",
                "the newest decision, every agent",
                lambda g: d.intent_insert_for_all(decision_id=fact.decision_id, created_ms=now_ms),
            )
        ],
        "IntentImport": [
            Case(
                "one",
                "one intent",
                lambda g: d.intent_import(
                    decision_id=fact.decision_id,
                    agent_id=_AGENT,
                    created_ms=now_ms,
                    snapshot_revision=None,
                ),
            )
        ],
        "IntentCover": [
            Case(
                "agent",
                "one agent's uncovered intents",
                lambda g: d.intent_cover(revision=1000, agent_id=_AGENT),
            )
        ],
        "IntentUncoveredCount": [
            Case("agent", "one agent", lambda g: d.intent_uncovered_count(agent_id=_AGENT))
        ],
        "IntentList": [Case("all", "every intent", lambda g: d.intent_list())],
        "SnapshotInsert": [
            Case(
                "next",
                "one agent's next snapshot",
                lambda g: d.snapshot_insert(
                    agent_id=_AGENT, revision=1000, body=_BODY, created_ms=now_ms
                ),
            )
        ],
        "SnapshotImport": [
            Case(
                "one",
                "one snapshot",
                lambda g: d.snapshot_import(
                    params=delivery.SnapshotImportParams(
                        agent_id=_AGENT,
                        revision=1000,
                        body=_BODY,
                        signature=None,
                        created_ms=now_ms,
                        delivered_ms=None,
                        superseded=False,
                    )
                ),
            )
        ],
        "SnapshotPending": [
            Case("agent", "one agent", lambda g: d.snapshot_pending(agent_id=_AGENT))
        ],
        "SnapshotSupersede": [
            Case("agent", "one agent", lambda g: d.snapshot_supersede(agent_id=_AGENT))
        ],
        "SnapshotSign": [
            Case(
                "one",
                "one snapshot",
                lambda g: d.snapshot_sign(signature=b"s" * 64, agent_id=_AGENT, revision=1),
            )
        ],
        "SnapshotDelivered": [
            Case(
                "one",
                "one snapshot",
                lambda g: d.snapshot_delivered(delivered_ms=now_ms, agent_id=_AGENT, revision=1),
            )
        ],
        "SnapshotList": [Case("all", "every snapshot", lambda g: d.snapshot_list())],
        "AgentsWithPendingWork": [
            Case("all", "every agent", lambda g: d.agents_with_pending_work())
        ],
        "AgentDeliveryTryLock": [
            Case("one", "one agent", lambda g: d.agent_delivery_try_lock(agent_id=_AGENT))
        ],
        "HitInsert": [
            Case(
                "new",
                "an event not counted yet",
                lambda g: t.hit_insert(event_id=4, key=fact.key, occurred_ms=now_ms),
            )
        ],
        "HitWindowMax": [
            Case(
                "newest",
                "the newest hit's key, a ten-minute window",
                lambda g: t.hit_window_max(
                    window_ms=600_000, key=fact.key, occurred_ms=fact.occurred_ms - 600_000
                ),
            )
        ],
        "HitList": [Case("all", "every hit", lambda g: t.hit_list())],
        "CounterGet": [Case("key", "one key", lambda g: t.counter_get(key=fact.key))],
        "CounterSet": [Case("key", "one key", lambda g: t.counter_set(key=fact.key, hits=100))],
        "CounterList": [Case("all", "every counter", lambda g: t.counter_list())],
        "DecisionActive": [
            Case(
                "target",
                "the newest decision's target",
                lambda g: t.decision_active(
                    site=fact.site,
                    address=fact.address,
                    rule_version=fact.rule_version,
                    at_ms=now_ms,
                ),
            )
        ],
        "DecisionInsert": [
            Case("new", "a new decision", lambda g: t.decision_insert(params=decision))
        ],
        "DecisionImport": [
            Case(
                "new",
                "a decision from the laboratory",
                lambda g: t.decision_import(
                    params=detection.DecisionImportParams(
                        **{k: getattr(decision, k) for k in decision.__slots__}
                    )
                ),
            )
        ],
        "DecisionList": [Case("all", "every decision", lambda g: t.decision_list())],
        "DecisionsInForce": [
            Case("now", "the decisions in force now", lambda g: t.decisions_in_force(at_ms=now_ms))
        ],
        "EventInsert": [
            Case(
                "new",
                "a new event",
                lambda g: ev.event_insert(
                    params=events.EventInsertParams(
                        node_id="node-3",
                        request_id="req-new",
                        site=fact.site,
                        address=fact.address,
                        rule_version=fact.rule_version,
                        occurred_ms=now_ms,
                        received_ms=now_ms + 5,
                        digest="0" * 64,
                    )
                ),
            )
        ],
        "EventByReplayKey": [
            Case(
                "known",
                "a known replay key",
                lambda g: ev.event_by_replay_key(node_id="node-3", request_id="req-3"),
            )
        ],
        "EventGet": [Case("id", "one event", lambda g: ev.event_get(id=3))],
        "EventList": [Case("all", "every event", lambda g: ev.event_list())],
        "EventCount": [Case("all", "every event", lambda g: ev.event_count())],
        "EventDigestRewrite": [
            Case(
                "one",
                "one event (the trigger refuses it: planned, not run)",
                lambda g: ev.event_digest_rewrite(digest="0" * 64, id=3),
                executes=False,
            )
        ],
    }
