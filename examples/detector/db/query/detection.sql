-- The detector's shared state, read and written under the shared key's lock.

-- name: HitInsert :one
-- Record that an event was counted; no row: it already was (a redelivery).
-- RETURNING rather than a row count: in a completion transaction running in
-- pipeline mode a row count is not known until the result is fetched.
INSERT INTO detector_hits (event_id, key, occurred_ms) VALUES (@event_id, @key, @occurred_ms)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id;

-- name: HitWindowMax :one
-- The largest rolling-window count among the windows that contain this event:
-- each window ends at a hit at or after the event and spans window_ms.
-- plan: detector_hits only by index detector_hits_key_time
SELECT coalesce(max(
    (SELECT count(*) FROM detector_hits h2
     WHERE h2.key = h.key
       AND h2.occurred_ms > h.occurred_ms - sqlc.arg(window_ms)::bigint
       AND h2.occurred_ms <= h.occurred_ms)
), 0)::bigint AS hits
FROM detector_hits h
WHERE h.key = sqlc.arg(key)::text
  AND h.occurred_ms >= sqlc.arg(occurred_ms)::bigint
  AND h.occurred_ms < sqlc.arg(occurred_ms)::bigint + sqlc.arg(window_ms)::bigint;

-- name: HitList :many
SELECT * FROM detector_hits ORDER BY event_id;

-- name: CounterGet :one
SELECT hits FROM detector_counters WHERE key = @key;

-- name: CounterSet :exec
-- Write the value the caller computed (read-modify-write: safe only under the key's lock).
INSERT INTO detector_counters (key, hits) VALUES (@key, @hits)
ON CONFLICT (key) DO UPDATE SET hits = excluded.hits;

-- name: CounterList :many
SELECT * FROM detector_counters ORDER BY key;

-- name: DecisionActive :one
-- A decision on this target still in force at at_ms, if any.
-- plan: detector_decisions only by index detector_decisions_target
SELECT * FROM detector_decisions
WHERE site = @site AND address = @address AND rule_version = @rule_version AND expires_ms > @at_ms
ORDER BY id
LIMIT 1;

-- name: DecisionInsert :one
INSERT INTO detector_decisions (site, address, rule_version, event_id, decided_ms, expires_ms)
VALUES (@site, @address, @rule_version, @event_id, @decided_ms, @expires_ms)
RETURNING id;

-- name: DecisionImport :one
-- Copy a decision from the laboratory with its original times.
INSERT INTO detector_decisions (site, address, rule_version, event_id, decided_ms, expires_ms)
VALUES (@site, @address, @rule_version, @event_id, @decided_ms, @expires_ms)
RETURNING id;

-- name: DecisionList :many
SELECT * FROM detector_decisions ORDER BY id;

-- name: DecisionsInForce :many
SELECT * FROM detector_decisions WHERE expires_ms > @at_ms ORDER BY site, address, rule_version, id;
