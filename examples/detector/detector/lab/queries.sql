-- The SQLite laboratory's queries, one per "-- name:" block (loaded by
-- detector.lab.queries). Parameters are named (:name), as sqlite3 binds them.

-- name: event_insert
INSERT INTO detector_events (node_id, request_id, site, address, rule_version, occurred_ms, received_ms, digest)
VALUES (:node_id, :request_id, :site, :address, :rule_version, :occurred_ms, :received_ms, :digest)
ON CONFLICT (node_id, request_id) DO NOTHING
RETURNING id;

-- name: event_by_replay_key
SELECT * FROM detector_events WHERE node_id = :node_id AND request_id = :request_id;

-- name: event_get
SELECT * FROM detector_events WHERE id = :id;

-- name: event_list
SELECT * FROM detector_events ORDER BY id;

-- name: event_digest_rewrite
UPDATE detector_events SET digest = :digest WHERE id = :id;

-- name: hit_insert
INSERT INTO detector_hits (event_id, key, occurred_ms) VALUES (:event_id, :key, :occurred_ms)
ON CONFLICT (event_id) DO NOTHING;

-- name: hit_window_max
SELECT coalesce(max(
    (SELECT count(*) FROM detector_hits h2
     WHERE h2.key = h.key
       AND h2.occurred_ms > h.occurred_ms - :window_ms
       AND h2.occurred_ms <= h.occurred_ms)
), 0) AS hits
FROM detector_hits h
WHERE h.key = :key AND h.occurred_ms >= :occurred_ms AND h.occurred_ms < :occurred_ms + :window_ms;

-- name: counter_get
SELECT hits FROM detector_counters WHERE key = :key;

-- name: counter_set
INSERT INTO detector_counters (key, hits) VALUES (:key, :hits)
ON CONFLICT (key) DO UPDATE SET hits = excluded.hits;

-- name: counter_list
SELECT * FROM detector_counters ORDER BY key;

-- name: decision_active
SELECT id FROM detector_decisions
WHERE site = :site AND address = :address AND rule_version = :rule_version AND expires_ms > :at_ms
LIMIT 1;

-- name: decision_insert
INSERT INTO detector_decisions (site, address, rule_version, event_id, decided_ms, expires_ms)
VALUES (:site, :address, :rule_version, :event_id, :decided_ms, :expires_ms)
RETURNING id;

-- name: decision_list
SELECT * FROM detector_decisions ORDER BY id;

-- name: decisions_in_force
SELECT * FROM detector_decisions WHERE expires_ms > :at_ms ORDER BY site, address, rule_version, id;

-- name: agent_upsert
INSERT INTO detector_agents (agent_id, endpoint) VALUES (:agent_id, :endpoint)
ON CONFLICT (agent_id) DO UPDATE SET endpoint = excluded.endpoint;

-- name: agent_list
SELECT * FROM detector_agents ORDER BY agent_id;

-- name: agent_revision_next
UPDATE detector_agents SET revision = revision + 1 WHERE agent_id = :agent_id RETURNING revision;

-- name: intent_insert_for_all
INSERT INTO detector_intents (decision_id, agent_id, created_ms)
SELECT :decision_id, agent_id, :created_ms FROM detector_agents
RETURNING id, agent_id;

-- name: intent_cover
UPDATE detector_intents SET snapshot_revision = :revision
WHERE agent_id = :agent_id AND snapshot_revision IS NULL;

-- name: intent_uncovered_count
SELECT count(*) FROM detector_intents WHERE agent_id = :agent_id AND snapshot_revision IS NULL;

-- name: intent_list
SELECT * FROM detector_intents ORDER BY id;

-- name: snapshot_insert
INSERT INTO detector_snapshots (agent_id, revision, body, created_ms)
VALUES (:agent_id, :revision, :body, :created_ms);

-- name: snapshot_pending
SELECT * FROM detector_snapshots
WHERE agent_id = :agent_id AND delivered_ms IS NULL AND NOT superseded
ORDER BY revision DESC
LIMIT 1;

-- name: snapshot_supersede
UPDATE detector_snapshots SET superseded = 1
WHERE agent_id = :agent_id AND delivered_ms IS NULL AND NOT superseded;

-- name: snapshot_sign
UPDATE detector_snapshots SET signature = :signature
WHERE agent_id = :agent_id AND revision = :revision AND signature IS NULL;

-- name: snapshot_delivered
UPDATE detector_snapshots SET delivered_ms = :delivered_ms
WHERE agent_id = :agent_id AND revision = :revision AND delivered_ms IS NULL;

-- name: snapshot_list
SELECT * FROM detector_snapshots ORDER BY agent_id, revision;

-- name: agents_with_pending_work
SELECT a.agent_id FROM detector_agents a
WHERE EXISTS (SELECT 1 FROM detector_intents i WHERE i.agent_id = a.agent_id AND i.snapshot_revision IS NULL)
   OR EXISTS (SELECT 1 FROM detector_snapshots s
              WHERE s.agent_id = a.agent_id AND s.delivered_ms IS NULL AND NOT s.superseded)
ORDER BY a.agent_id;

-- name: job_insert
INSERT INTO lab_jobs (kind, ref) VALUES (:kind, :ref);

-- name: job_next
SELECT * FROM lab_jobs WHERE done_ms IS NULL ORDER BY id LIMIT 1;

-- name: job_attempt
UPDATE lab_jobs SET attempts = attempts + 1 WHERE id = :id;

-- name: job_done
UPDATE lab_jobs SET done_ms = :done_ms WHERE id = :id AND done_ms IS NULL;

-- name: job_list_pending
SELECT * FROM lab_jobs WHERE done_ms IS NULL ORDER BY id;

-- name: agent_get
SELECT * FROM detector_agents WHERE agent_id = :agent_id;

-- name: hit_list
SELECT * FROM detector_hits ORDER BY event_id;
