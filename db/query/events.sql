-- Queries on job_events, the append-only history of every transition.

-- name: EventListByJob :many
-- plan: job_events only by index job_events_job_idx
SELECT * FROM job_events WHERE job_id = @job_id ORDER BY id;

-- name: EventPrune :execrows
-- Delete, of the batch_size oldest events by id, those older than the given
-- age. Ids follow insertion, and `at` follows the ids to within the length of
-- one transaction (an event's `at` is its transaction's clock), so the lowest
-- ids are the oldest events: pruning walks the primary key from its start and
-- needs no index on `at`, which every event would otherwise pay for on the
-- hot path (migration 00010). An old event queued behind a younger one waits
-- until that one is old enough too. Fewer deleted than batch_size: the oldest
-- events left are young enough to keep.
-- plan: job_events only by index job_events_pkey
DELETE FROM job_events
WHERE id IN (
    SELECT oldest.id
    FROM (SELECT id, at FROM job_events ORDER BY id LIMIT @batch_size) AS oldest
    WHERE oldest.at < coalesce(sqlc.narg('now')::timestamptz, now()) - @older_than::interval
);

-- name: EventInsertEnqueuedMany :exec
-- The enqueued events of a batch, built by the server from the ids alone.
INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
SELECT unnest(@job_ids::uuid[]), @at::timestamptz, 'enqueued', NULL, 'queued', 0;

-- name: EventInsertEnqueuedNow :one
-- The enqueued events of a batch's plain jobs, written before the jobs
-- themselves (job_events has no foreign key, and both commit together), at
-- the transaction's clock, which it returns: the batch gives its jobs that
-- time. Sent first, it lets the server write while the client validates.
WITH recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT unnest(@job_ids::uuid[]), now(), 'enqueued', NULL, 'queued', 0
)
SELECT now()::timestamptz AS now;
