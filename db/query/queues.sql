-- Queries on queues: the per-queue controls the claim enforces (JobClaim).
-- A queue needs no row to be used; a row is created the first time an
-- operator pauses or limits the queue.

-- name: QueueSetPaused :one
-- actor: who asked (recorded as changed_by; NULL: not recorded). Every control
-- sets it, so it always names whoever made the last change.
INSERT INTO queues (name, paused, changed_by) VALUES (@name, @paused, sqlc.narg('actor'))
ON CONFLICT (name) DO UPDATE
SET paused = excluded.paused, changed_by = excluded.changed_by, updated_at = now()
RETURNING *;

-- name: QueueSetLimits :one
-- Set the concurrency limit, the rate and/or the limit per concurrency key
-- (migration 00020); a NULL argument leaves that control as it was
-- (set_concurrency / set_rate / set_key_limit say which to change). A new
-- rate over the same interval keeps the window counter, so the claims of the
-- current window count against the new count. A new interval starts a fresh
-- window at once: the counter's window is one of the old interval's, and
-- nothing says how many claims of the new window it holds.
INSERT INTO queues (name, concurrency_limit, rate_limit, rate_interval, key_limit, changed_by)
VALUES (@name, sqlc.narg('concurrency_limit'), sqlc.narg('rate_limit'),
        sqlc.narg('rate_interval'), sqlc.narg('key_limit'), sqlc.narg('actor'))
ON CONFLICT (name) DO UPDATE
SET concurrency_limit = CASE WHEN @set_concurrency::boolean
                             THEN excluded.concurrency_limit
                             ELSE queues.concurrency_limit END,
    key_limit = CASE WHEN @set_key_limit::boolean THEN excluded.key_limit
                     ELSE queues.key_limit END,
    rate_limit = CASE WHEN @set_rate::boolean THEN excluded.rate_limit
                      ELSE queues.rate_limit END,
    rate_interval = CASE WHEN @set_rate::boolean THEN excluded.rate_interval
                         ELSE queues.rate_interval END,
    window_start = CASE
        WHEN @set_rate::boolean AND excluded.rate_interval IS DISTINCT FROM queues.rate_interval
            THEN NULL
        ELSE queues.window_start END,
    window_claims = CASE
        WHEN @set_rate::boolean AND excluded.rate_interval IS DISTINCT FROM queues.rate_interval
            THEN 0
        ELSE queues.window_claims END,
    changed_by = excluded.changed_by,
    updated_at = now()
RETURNING *;

-- name: QueueClearLimits :one
-- No row back when the queue has none: it had no limits to clear.
UPDATE queues
SET concurrency_limit = NULL, rate_limit = NULL, rate_interval = NULL, key_limit = NULL,
    window_start = NULL, window_claims = 0, changed_by = sqlc.narg('actor'), updated_at = now()
WHERE name = @name
RETURNING *;

-- name: QueueList :many
-- Every queue with a row or with queued or leased jobs, with its controls and
-- how many of its jobs are queued and leased right now. The counts read only
-- the partial indexes of queued (jobs_claim_idx) and leased
-- (jobs_leased_idx) rows, never finished jobs.
-- plan: jobs only by index jobs_claim_idx, jobs_leased_idx
WITH queued AS (
    SELECT jobs.queue, count(*)::bigint AS n FROM jobs WHERE jobs.state = 'queued'
    GROUP BY jobs.queue
), leased AS (
    SELECT jobs.queue, count(*)::bigint AS n FROM jobs WHERE jobs.state = 'leased'
    GROUP BY jobs.queue
), names AS (
    SELECT queues.name FROM queues
    UNION SELECT queued.queue FROM queued
    UNION SELECT leased.queue FROM leased
)
SELECT names.name::text AS name,
       coalesce(queues.paused, false)::boolean AS paused,
       queues.concurrency_limit,
       queues.rate_limit,
       queues.rate_interval,
       queues.key_limit,
       queues.changed_by,
       coalesce(queued.n, 0)::bigint AS queued,
       coalesce(leased.n, 0)::bigint AS leased
FROM names
LEFT JOIN queues ON queues.name = names.name
LEFT JOIN queued ON queued.queue = names.name
LEFT JOIN leased ON leased.queue = names.name
ORDER BY names.name;

-- name: QueueClearableCount :one
-- How many of the queue's jobs a clear deletes: those neither running nor
-- finished (queued, due or not, and waiting on dependencies or a key), and the
-- database time they were counted at (the clear takes no job created after it).
-- plan: jobs only by index jobs_claim_idx, jobs_waiting_idx, jobs_parked_queue_idx
SELECT (SELECT count(*) FROM jobs
        WHERE jobs.state = 'queued' AND jobs.queue = @queue)::bigint AS queued,
       (SELECT count(*) FROM jobs
        WHERE jobs.state = 'waiting' AND jobs.queue = @queue)::bigint AS waiting,
       now()::timestamptz AS counted_at;

-- name: QueueClearableIds :many
-- A batch of the jobs a clear deletes (see QueueClearableCount), created by
-- counted_at; JobDeleteMany then deletes those still not running. The waiting
-- half walks jobs_waiting_idx in its order, oldest first.
-- plan: jobs only by index jobs_claim_idx, jobs_waiting_idx, jobs_parked_queue_idx
(SELECT jobs.id FROM jobs
 WHERE jobs.state = 'queued' AND jobs.queue = @queue AND jobs.created_at <= @counted_at
 LIMIT @batch_size)
UNION ALL
(SELECT jobs.id FROM jobs
 WHERE jobs.state = 'waiting' AND jobs.queue = @queue AND jobs.created_at <= @counted_at
 ORDER BY jobs.created_at, jobs.id
 LIMIT @batch_size);
