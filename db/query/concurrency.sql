-- Concurrency limited per key (NewJob.concurrency_key, migration 00020).

-- name: JobInsertKeyed :one
-- Insert a job with a concurrency key, waiting, with its row in
-- job_concurrency and its event. The caller holds the key's lock
-- (KeyLockMany) and admits afterwards (JobAdmitKeyed), in the same
-- transaction: whether the job runs now is the admission's to say. A job
-- without a key_limit of its own takes its queue's; with neither, nothing
-- is written and no row comes back (the caller refuses the job).
WITH known AS (
    SELECT sqlc.narg('key_limit')::integer IS NOT NULL
           OR EXISTS (SELECT 1 FROM queues
                      WHERE queues.name = @queue::text AND queues.key_limit IS NOT NULL)
               AS ok
), inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, meta, state, created_at
    )
    SELECT @id::uuid, @queue::text, @type::text,
           nullif(sqlc.arg('payload_json')::text, '')::jsonb, @priority::smallint,
           @max_attempts::integer, @backoff_kind::backoff_kind, @backoff_base::interval,
           @backoff_max::interval,
           coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval),
           coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb), 'waiting', now()
    FROM known
    WHERE known.ok
    RETURNING id, run_at, created_at
), member AS (
    INSERT INTO job_concurrency (job_id, key, key_limit)
    SELECT inserted.id, @key::text, sqlc.narg('key_limit')::integer FROM inserted
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL::job_state, 'waiting', 0, NULL::text
    FROM inserted
)
SELECT inserted.run_at, inserted.created_at FROM inserted;

-- name: JobAdmitKeyed :many
-- Admit the waiting jobs of the given keys while their keys have room: for
-- each key, as many of its oldest waiting jobs as its limit (the oldest
-- waiting job's own, else its queue's) leaves after the jobs already admitted. Each is queued, its
-- event written and its queue notified on channel. Run it while holding the
-- keys' locks (KeyLockMany), in a statement after the one that took them,
-- so the count includes what every earlier holder committed. A waiting row
-- whose job is no longer waiting (cancelled, deleted) is passed over; the
-- maintenance leader ends it. Returns the jobs admitted.
-- plan: jobs only by index jobs_pkey
-- plan: job_concurrency only by index job_concurrency_waiting_idx, job_concurrency_admitted_idx, job_concurrency_pkey
WITH room AS MATERIALIZED (
    SELECT wanted.key,
           greatest(0, coalesce(first_waiting.key_limit, 0) - admitted.n) AS room
    FROM (SELECT DISTINCT unnest((SELECT @keys::text[])) AS key) AS wanted
    CROSS JOIN LATERAL (
        SELECT count(*)::integer AS n
        FROM job_concurrency AS slot
        WHERE slot.key = wanted.key AND slot.status = 'admitted'
    ) AS admitted
    LEFT JOIN LATERAL (
        -- Its own limit, else its queue's, else none (a queue's limit cleared
        -- since it was enqueued): then the key is not limited.
        SELECT coalesce(slot.key_limit,
                        (SELECT queues.key_limit FROM jobs
                         JOIN queues ON queues.name = jobs.queue
                         WHERE jobs.id = slot.job_id),
                        2147483647) AS key_limit
        FROM job_concurrency AS slot
        WHERE slot.key = wanted.key AND slot.status = 'waiting'
        ORDER BY slot.job_id
        LIMIT 1
    ) AS first_waiting ON true
), chosen AS MATERIALIZED (
    SELECT next.job_id
    FROM room
    CROSS JOIN LATERAL (
        SELECT slot.job_id
        FROM job_concurrency AS slot
        -- Still waiting: a cancelled or deleted job takes no slot.
        JOIN LATERAL (
            SELECT jobs.state FROM jobs WHERE jobs.id = slot.job_id LIMIT 1
        ) AS job ON job.state = (SELECT 'waiting'::job_state)
        WHERE slot.key = room.key AND slot.status = 'waiting'
        ORDER BY slot.job_id
        LIMIT room.room
    ) AS next
    WHERE room.room > 0
), marked AS (
    UPDATE job_concurrency
    SET status = 'admitted'
    WHERE job_concurrency.job_id = ANY ((SELECT array_agg(chosen.job_id) FROM chosen)::uuid[])
), admitted AS (
    UPDATE jobs
    SET state = 'queued', updated_at = now()
    WHERE jobs.id = ANY ((SELECT array_agg(chosen.job_id) FROM chosen)::uuid[])
      AND jobs.state = (SELECT 'waiting'::job_state)
    RETURNING jobs.id, jobs.updated_at, pg_notify(@channel::text, jobs.queue) AS woken
), logged AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT admitted.id, admitted.updated_at, 'admitted', 'waiting', 'queued', 0
    FROM admitted
)
SELECT admitted.id FROM admitted;

-- name: JobConcurrencySettle :many
-- The maintenance leader's repair, batch_size rows at a time after the
-- cursor (job_id): a row still 'admitted' or 'waiting' whose job ended
-- outside a completion (a reaper, an operator's cancel) or is gone is
-- ended, so its slot is free again. Returns the keys of the rows it ended
-- (admit for them), and the last job id it looked at as a row of its own
-- with key NULL (the cursor; none: the end).
-- plan: job_concurrency only by index job_concurrency_pkey
-- plan: jobs only by index jobs_pkey
WITH batch AS (
    SELECT slot.job_id, slot.key, slot.status
    FROM job_concurrency AS slot
    WHERE slot.job_id > @after_id::uuid AND slot.status <> 'ended'
    ORDER BY slot.job_id
    LIMIT @batch_size
), stale AS (
    SELECT batch.job_id
    FROM batch
    LEFT JOIN LATERAL (
        SELECT jobs.state FROM jobs WHERE jobs.id = batch.job_id LIMIT 1
    ) AS job ON true
    WHERE job.state IS NULL
       OR (batch.status = 'admitted' AND job.state IN ('succeeded', 'dead', 'cancelled'))
       OR (batch.status = 'waiting' AND job.state <> 'waiting')
), ended AS (
    UPDATE job_concurrency
    SET status = 'ended'
    WHERE job_concurrency.job_id = ANY ((SELECT array_agg(stale.job_id) FROM stale)::uuid[])
      AND job_concurrency.status <> 'ended'
    RETURNING job_concurrency.key
)
SELECT DISTINCT ended.key::text AS key, NULL::uuid AS last_id FROM ended
UNION ALL
SELECT NULL::text, (array_agg(batch.job_id ORDER BY batch.job_id DESC))[1]::uuid FROM batch;

-- name: JobKeysWaiting :many
-- Keys that have waiting jobs, up to batch_size after the cursor, in key
-- order: a loose index scan of job_concurrency_waiting_idx, one descent per
-- key. The maintenance leader admits for them, so that no key is left
-- waiting when the admission after a completion did not run (its process
-- died between the two).
-- plan: job_concurrency only by index job_concurrency_waiting_idx
WITH RECURSIVE keys (key) AS (
    (SELECT slot.key FROM job_concurrency AS slot
     WHERE slot.status = 'waiting' AND slot.key > @after_key::text
     ORDER BY slot.key LIMIT 1)
    UNION ALL
    SELECT next.key
    FROM keys
    CROSS JOIN LATERAL (
        SELECT slot.key FROM job_concurrency AS slot
        WHERE slot.status = 'waiting' AND slot.key > keys.key
        ORDER BY slot.key LIMIT 1
    ) AS next
)
SELECT keys.key FROM keys LIMIT @batch_size;
