-- Queries on job_events, the append-only history of every transition.

-- name: EventListByJob :many
SELECT * FROM job_events WHERE job_id = @job_id ORDER BY id;

-- name: EventPrune :execrows
-- Delete up to batch_size events older than the given age.
DELETE FROM job_events
WHERE id IN (
    SELECT id FROM job_events
    WHERE at < coalesce(sqlc.narg('now')::timestamptz, now()) - @older_than::interval
    LIMIT @batch_size
);

-- name: EventInsertEnqueuedMany :exec
-- The enqueued events of a batch, built by the server from the ids alone.
INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
SELECT unnest(@job_ids::uuid[]), @at::timestamptz, 'enqueued', NULL, 'queued', 0;
