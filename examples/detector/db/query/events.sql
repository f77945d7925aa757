-- Ingest and read events (examples/detector/migrations).

-- name: EventInsert :one
-- Insert an event unless its (node, request id) is known; no row means it was.
INSERT INTO detector_events (node_id, request_id, site, address, rule_version, occurred_ms, received_ms, digest)
VALUES (@node_id, @request_id, @site, @address, @rule_version, @occurred_ms, @received_ms, @digest)
ON CONFLICT ON CONSTRAINT detector_events_replay_key DO NOTHING
RETURNING id;

-- name: EventByReplayKey :one
SELECT * FROM detector_events WHERE node_id = @node_id AND request_id = @request_id;

-- name: EventGet :one
SELECT * FROM detector_events WHERE id = @id;

-- name: EventList :many
SELECT * FROM detector_events ORDER BY id;

-- name: EventCount :one
SELECT count(*)::bigint AS events FROM detector_events;

-- name: EventCopy :copyfrom
INSERT INTO detector_events (node_id, request_id, site, address, rule_version, occurred_ms, received_ms, digest)
VALUES (@node_id, @request_id, @site, @address, @rule_version, @occurred_ms, @received_ms, @digest);

-- name: EventDigestRewrite :execrows
-- Only for the test that shows digests cannot be rewritten (the trigger refuses).
UPDATE detector_events SET digest = @digest WHERE id = @id;
