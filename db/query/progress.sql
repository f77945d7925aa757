-- A running job's progress (migration 00014): written by the heartbeat,
-- read by the CLI and the dashboard, pruned by maintenance.

-- name: JobProgressRecord :exec
-- The latest progress of jobs the owner still holds, as the attempt it holds
-- them as: a report for a lease the owner lost is dropped. ids, attempts,
-- fractions and messages are parallel arrays.
-- plan: jobs only by index jobs_pkey
WITH reported AS MATERIALIZED (
    SELECT unnest((SELECT @ids::uuid[])) AS id,
           unnest((SELECT @attempts::integer[])) AS attempt,
           unnest((SELECT @fractions::real[])) AS fraction,
           unnest((SELECT @messages::text[])) AS message,
           'leased'::job_state AS held_state,
           @owner::text AS owner
)
INSERT INTO job_progress (job_id, attempt, owner, fraction, message, updated_at)
SELECT reported.id, reported.attempt, reported.owner, reported.fraction, reported.message,
       now()
FROM reported
JOIN jobs ON jobs.id = reported.id
         AND jobs.attempts = reported.attempt
         AND jobs.state = reported.held_state
         AND jobs.lease_owner = reported.owner
ON CONFLICT (job_id) DO UPDATE
SET attempt = excluded.attempt,
    owner = excluded.owner,
    fraction = excluded.fraction,
    message = excluded.message,
    updated_at = excluded.updated_at;

-- name: JobProgressOf :many
-- The progress of those of the given jobs that are running as the attempt,
-- and under the lease owner, that reported it.
-- plan: jobs only by index jobs_pkey
SELECT job_progress.job_id, job_progress.fraction, job_progress.message,
       job_progress.updated_at
FROM job_progress
JOIN jobs ON jobs.id = job_progress.job_id
         AND jobs.attempts = job_progress.attempt
         AND jobs.lease_owner = job_progress.owner
         AND jobs.state = 'leased'
WHERE job_progress.job_id = ANY (@ids::uuid[]);

-- name: JobProgressPrune :execrows
-- Delete the progress of attempts that ended (the job finished, was retried,
-- or is gone): at most max_rows of them, oldest reports first.
-- plan: jobs only by index jobs_pkey
DELETE FROM job_progress
WHERE job_progress.job_id IN (
    SELECT stale.job_id
    FROM job_progress AS stale
    WHERE NOT EXISTS (
        SELECT 1 FROM jobs
        WHERE jobs.id = stale.job_id
          AND jobs.attempts = stale.attempt
          AND jobs.lease_owner = stale.owner
          AND jobs.state = 'leased'
    )
    ORDER BY stale.updated_at
    LIMIT @max_rows
);
