-- Jobs that hold a uniqueness key (NewJob.unique, migration 00016). A job holds
-- its key while its state's bit (job_state_bit) is set in its unique_states.

-- name: JobInsertUnique :one
-- Insert a job with a uniqueness policy, its event and its queue's wake-up,
-- unless a job holding the same key is in one of its unique states: then
-- nothing is written and no row comes back, and the caller reads the holder
-- (JobGetUniqueHolder). Two such enqueues at once: the second waits for the
-- first to commit and then inserts nothing. The key is the policy's base,
-- bucketed by period on the database's clock (job_unique_key). Never handed
-- to an idle worker: a handed job is leased at once, and a key held only
-- while queued would be given up before the job was seen. It reads no
-- table: the unique index is the insert's arbiter. (The nullif only lets sqlc
-- vet EXPLAIN it with an empty placeholder: the store never sends ''.)
WITH inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, meta,
        unique_key, unique_states, created_at
    )
    VALUES (
        @id::uuid, @queue::text, @type::text, nullif(sqlc.arg('payload_json')::text, '')::jsonb,
        @priority::smallint, @max_attempts::integer,
        @backoff_kind::backoff_kind, @backoff_base::interval, @backoff_max::interval,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval),
        coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb),
        job_unique_key(@unique_base::text, sqlc.narg('period')::interval),
        @unique_states::integer, now()
    )
    ON CONFLICT (unique_key)
        WHERE unique_key IS NOT NULL AND (unique_states & job_state_bit(state)) <> 0
    DO NOTHING
    RETURNING id, queue, run_at, created_at
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL::job_state,
           'queued'::job_state, 0, NULL::text
    FROM inserted
), notified AS (
    SELECT pg_notify(@channel::text, inserted.queue) FROM inserted
)
SELECT inserted.run_at, inserted.created_at
FROM inserted CROSS JOIN notified;

-- name: JobGetUniqueHolder :one
-- The job that holds the key a policy's base makes now, if any holds it.
-- plan: jobs only by index jobs_unique_key_idx
SELECT *
FROM jobs
WHERE unique_key = job_unique_key(@unique_base::text, sqlc.narg('period')::interval)
  AND unique_key IS NOT NULL
  AND (unique_states & job_state_bit(state)) <> 0
LIMIT 1;
