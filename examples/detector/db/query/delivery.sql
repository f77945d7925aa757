-- Agents, delivery intent (the outbox) and signed snapshots.

-- name: AgentUpsert :exec
INSERT INTO detector_agents (agent_id, endpoint) VALUES (@agent_id, @endpoint)
ON CONFLICT (agent_id) DO UPDATE SET endpoint = excluded.endpoint;

-- name: AgentList :many
SELECT * FROM detector_agents ORDER BY agent_id;

-- name: AgentGet :one
SELECT * FROM detector_agents WHERE agent_id = @agent_id;

-- name: AgentRevisionNext :one
-- Allocate the agent's next revision; the row lock serialises allocators until commit.
UPDATE detector_agents SET revision = revision + 1 WHERE agent_id = @agent_id RETURNING revision;

-- name: AgentRevisionImport :exec
UPDATE detector_agents SET revision = @revision WHERE agent_id = @agent_id;

-- name: IntentInsertForAll :many
-- One intent per agent for a new decision.
INSERT INTO detector_intents (decision_id, agent_id, created_ms)
SELECT @decision_id, agent_id, @created_ms FROM detector_agents
RETURNING id, agent_id;

-- name: IntentImport :exec
INSERT INTO detector_intents (decision_id, agent_id, created_ms, snapshot_revision)
VALUES (@decision_id, @agent_id, @created_ms, sqlc.narg('snapshot_revision'));

-- name: IntentCover :execrows
UPDATE detector_intents SET snapshot_revision = @revision
WHERE agent_id = @agent_id AND snapshot_revision IS NULL;

-- name: IntentUncoveredCount :one
-- plan: detector_intents only by index detector_intents_uncovered
SELECT count(*)::bigint AS intents FROM detector_intents
WHERE agent_id = @agent_id AND snapshot_revision IS NULL;

-- name: IntentList :many
SELECT * FROM detector_intents ORDER BY id;

-- name: SnapshotInsert :exec
INSERT INTO detector_snapshots (agent_id, revision, body, created_ms)
VALUES (@agent_id, @revision, @body, @created_ms);

-- name: SnapshotImport :exec
INSERT INTO detector_snapshots (agent_id, revision, body, signature, created_ms, delivered_ms, superseded)
VALUES (@agent_id, @revision, @body, sqlc.narg('signature'), @created_ms, sqlc.narg('delivered_ms'), @superseded);

-- name: SnapshotPending :one
-- The agent's newest snapshot not yet delivered nor superseded, if any.
SELECT * FROM detector_snapshots
WHERE agent_id = @agent_id AND delivered_ms IS NULL AND NOT superseded
ORDER BY revision DESC
LIMIT 1;

-- name: SnapshotSupersede :execrows
UPDATE detector_snapshots SET superseded = true
WHERE agent_id = @agent_id AND delivered_ms IS NULL AND NOT superseded;

-- name: SnapshotSign :execrows
-- Store the signature of the stored bytes; a snapshot is signed once.
UPDATE detector_snapshots SET signature = @signature
WHERE agent_id = @agent_id AND revision = @revision AND signature IS NULL;

-- name: SnapshotDelivered :execrows
UPDATE detector_snapshots SET delivered_ms = @delivered_ms
WHERE agent_id = @agent_id AND revision = @revision AND delivered_ms IS NULL;

-- name: SnapshotList :many
SELECT * FROM detector_snapshots ORDER BY agent_id, revision;

-- name: AgentsWithPendingWork :many
-- The durable scan: agents with intent not yet in a snapshot, or a snapshot not delivered.
SELECT a.agent_id FROM detector_agents a
WHERE EXISTS (SELECT 1 FROM detector_intents i WHERE i.agent_id = a.agent_id AND i.snapshot_revision IS NULL)
   OR EXISTS (SELECT 1 FROM detector_snapshots s
              WHERE s.agent_id = a.agent_id AND s.delivered_ms IS NULL AND NOT s.superseded)
ORDER BY a.agent_id;

-- name: AgentDeliveryTryLock :one
-- Take the agent's delivery lock for this transaction, without waiting: true
-- when taken. One delivery per agent at a time, so an agent receives its
-- revisions in increasing order. (Should the hash collide with another
-- advisory lock, a delivery only waits its turn.)
SELECT pg_try_advisory_xact_lock(hashtextextended('detector.deliver:' || @agent_id::text, 0)) AS taken;
