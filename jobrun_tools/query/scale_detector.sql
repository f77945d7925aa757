-- The detector's tables (examples/detector/migrations) in the plan report's
-- scale database: one detector event per five jobs, the rows each event
-- leaves, set-based and a function of the row number and `now_ms` alone (see
-- scale.sql). Queries without parameters use mod(), not %: their generated
-- constant is sent as written, with the generator's doubled %.

-- name: ScaleFillDetectorEvents :execrows
-- Events of 20 nodes about 4,850 targets (50 sites, 97 addresses), about
-- 400 ms apart, the newest at now_ms.
INSERT INTO detector_events (
    node_id, request_id, site, address, rule_version, occurred_ms, received_ms, digest
)
SELECT 'node-' || (g % 20), 'req-' || g, 'site-' || (g % 50), '192.0.2.' || (g % 97),
       CASE WHEN g % 10 = 0 THEN 'r2' ELSE 'r1' END,
       sqlc.arg('now_ms')::bigint - (sqlc.arg('events')::bigint - g) * 400,
       sqlc.arg('now_ms')::bigint - (sqlc.arg('events')::bigint - g) * 400 + 5,
       encode(sha256(convert_to('event-' || g, 'UTF8')), 'hex')
FROM generate_series(1, sqlc.arg('events')::bigint) AS g;

-- name: ScaleFillDetectorHits :execrows
-- Three events in four counted, under their target's key and a ten-minute window.
INSERT INTO detector_hits (event_id, key, occurred_ms)
SELECT id, site || '|' || address || '|' || rule_version || '|600000', occurred_ms
FROM detector_events
WHERE mod(id, 4) <> 0
ORDER BY id;

-- name: ScaleFillDetectorCounters :execrows
INSERT INTO detector_counters (key, hits)
SELECT key, count(*) FROM detector_hits GROUP BY key ORDER BY key;

-- name: ScaleFillDetectorDecisions :execrows
-- A ban for one event in a hundred, for an hour.
INSERT INTO detector_decisions (site, address, rule_version, event_id, decided_ms, expires_ms)
SELECT site, address, rule_version, id, occurred_ms, occurred_ms + 3600000
FROM detector_events
WHERE mod(id, 100) = 0
ORDER BY id;

-- name: ScaleFillDetectorAgents :execrows
-- Eight agents, each at the revision of its last snapshot.
INSERT INTO detector_agents (agent_id, endpoint, revision)
SELECT 'agent-' || a, 'https://agent-' || a || '.example/bans',
       greatest(sqlc.arg('events')::bigint / 800, 1)
FROM generate_series(1, 8) AS a;

-- name: ScaleFillDetectorIntents :execrows
-- One intent per agent per decision; all covered by a snapshot but those of
-- the newest five decisions.
INSERT INTO detector_intents (decision_id, agent_id, created_ms, snapshot_revision)
SELECT decision.id, agent.agent_id, decision.decided_ms,
       CASE WHEN decision.id > (SELECT max(id) - 5 FROM detector_decisions)
            THEN NULL ELSE greatest(sqlc.arg('events')::bigint / 800, 1) END
FROM detector_decisions AS decision
CROSS JOIN detector_agents AS agent
ORDER BY decision.id, agent.agent_id;

-- name: ScaleFillDetectorSnapshots :execrows
-- Each agent's snapshots, one per 800 events; all delivered but the last.
INSERT INTO detector_snapshots (
    agent_id, revision, body, signature, created_ms, delivered_ms, superseded
)
SELECT agent.agent_id, n.revision, convert_to(repeat('ban;', 64), 'UTF8'),
       convert_to(repeat('s', 64), 'UTF8'),
       sqlc.arg('now_ms')::bigint - (greatest(sqlc.arg('events')::bigint / 800, 1) - n.revision) * 320000,
       CASE WHEN n.revision < greatest(sqlc.arg('events')::bigint / 800, 1)
            THEN sqlc.arg('now_ms')::bigint
                 - (greatest(sqlc.arg('events')::bigint / 800, 1) - n.revision) * 320000 + 50 END,
       false
FROM detector_agents AS agent
CROSS JOIN generate_series(1, greatest(sqlc.arg('events')::bigint / 800, 1)) AS n (revision)
ORDER BY agent.agent_id, n.revision;

-- name: ScaleDetectorFacts :one
-- Rows of the detector's tables the report's cases take their parameters
-- from: the newest hit and the newest decision.
SELECT hit.key, hit.occurred_ms, decision.id AS decision_id, decision.site, decision.address,
       decision.rule_version, decision.decided_ms
FROM (SELECT key, occurred_ms FROM detector_hits ORDER BY event_id DESC LIMIT 1) AS hit
CROSS JOIN (SELECT * FROM detector_decisions ORDER BY id DESC LIMIT 1) AS decision;
