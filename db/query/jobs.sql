-- Queries on the jobs table: every state transition of the store contract.
-- Each transition that must be recorded writes its job_events rows in the same
-- statement (a data-modifying CTE), so a transition and its event are one
-- round trip and can never be separated.

-- name: JobInsert :one
-- Insert one job; on an idempotency-key conflict insert nothing and return no
-- row (the caller then reads the stored job). The enqueued event is written in
-- the same statement.
WITH inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, idempotency_key
    ) VALUES (
        @id, @queue, @type, @payload, @priority, @max_attempts,
        @backoff_kind, @backoff_base, @backoff_max,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval),
        sqlc.narg('idempotency_key')
    )
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL, inserted.state, 0
    FROM inserted
)
SELECT * FROM inserted;

-- name: JobInsertCopy :copyfrom
INSERT INTO jobs (
    id, queue, type, payload, priority, max_attempts,
    backoff_kind, backoff_base, backoff_max, run_at, idempotency_key,
    created_at, updated_at
) VALUES (
    @id, @queue, @type, @payload, @priority, @max_attempts,
    @backoff_kind, @backoff_base, @backoff_max, @run_at, @idempotency_key,
    @created_at, @updated_at
);

-- name: JobInsertKeyedMany :many
-- Insert keyed jobs of a batch in one statement; returns the ids actually
-- inserted. Keys that already exist insert nothing (the caller compares
-- bodies). The arrays are parallel: element i of each is job i.
INSERT INTO jobs (
    id, queue, type, payload, priority, max_attempts,
    backoff_kind, backoff_base, backoff_max, run_at, idempotency_key,
    created_at, updated_at
)
-- Several unnest() calls in one select list run in lockstep, zipping the
-- parallel arrays into rows.
SELECT
    unnest(@ids::uuid[]), unnest(@queues::text[]), unnest(@types::text[]),
    unnest(@payloads::jsonb[]), unnest(@priorities::smallint[]),
    unnest(@max_attempts::integer[]), unnest(@backoff_kinds::backoff_kind[]),
    unnest(@backoff_bases::interval[]), unnest(@backoff_maxes::interval[]),
    unnest(@run_ats::timestamptz[]), unnest(@idempotency_keys::text[]),
    @created_at::timestamptz, @created_at::timestamptz
ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: JobGetByIdempotencyKey :one
SELECT * FROM jobs WHERE queue = @queue::text AND idempotency_key = @idempotency_key::text;

-- name: JobGetByIdempotencyKeys :many
SELECT jobs.*
FROM jobs
JOIN (
    SELECT unnest(@queues::text[]) AS queue, unnest(@idempotency_keys::text[]) AS key
) AS wanted ON jobs.queue = wanted.queue AND jobs.idempotency_key = wanted.key;

-- name: JobNotify :exec
-- Wake listeners of a queue. Sent inside the producing transaction, so
-- PostgreSQL delivers it only at commit, when the job is visible.
SELECT pg_notify(@channel::text, @queue::text);

-- name: JobGet :one
SELECT * FROM jobs WHERE id = @id;

-- name: JobClaim :many
-- Lease up to max_jobs due jobs of the given queues, in priority, run_at, id
-- order, and record one claimed event per job when record_events is set (the
-- terminal event mode skips them). SKIP LOCKED lets concurrent claimers take
-- disjoint rows without waiting on each other.
WITH picked AS (
    -- One index-ordered scan per queue (jobs_claim_idx yields the first
    -- max_jobs due rows of that queue and stops), then the best of those.
    SELECT candidate.id
    FROM unnest(@queues::text[]) AS wanted (queue)
    CROSS JOIN LATERAL (
        SELECT jobs.id, jobs.priority, jobs.run_at
        FROM jobs
        WHERE jobs.state = 'queued'
          AND jobs.queue = wanted.queue
          AND jobs.run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        ORDER BY jobs.priority, jobs.run_at, jobs.id
        LIMIT @max_jobs
        FOR UPDATE SKIP LOCKED
    ) AS candidate
    ORDER BY candidate.priority, candidate.run_at, candidate.id
    LIMIT @max_jobs
), claimed AS (
    UPDATE jobs
    SET state = 'leased',
        attempts = jobs.attempts + 1,
        lease_owner = @owner::text,
        lease_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
        updated_at = now()
    FROM picked
    WHERE jobs.id = picked.id
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT claimed.id, claimed.updated_at, 'claimed', 'queued', 'leased',
           claimed.attempts, claimed.lease_owner
    FROM claimed
    WHERE @record_events::boolean
)
SELECT * FROM claimed;

-- name: JobHeartbeat :many
-- Extend the leases the owner still holds (the same attempt, not expired),
-- except those whose cancel was requested: the owner must stop those jobs.
-- ids and attempts are parallel arrays: job i was claimed as attempt i.
UPDATE jobs
SET lease_expires_at = @until::timestamptz, updated_at = now()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@attempts::integer[]) AS attempt) AS held
WHERE jobs.id = held.id
  AND jobs.attempts = held.attempt
  AND jobs.state = 'leased'
  AND jobs.lease_owner = @owner::text
  AND jobs.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
  AND NOT jobs.cancel_requested
RETURNING jobs.id;

-- name: JobLockMany :many
-- Lock jobs for a completion and say which of them the owner still holds
-- under the lease fence (owner, attempt, unexpired lease); no effect may run
-- for the others. ids and attempts are parallel arrays.
SELECT jobs.id,
       (jobs.state = 'leased'
        AND jobs.lease_owner = @owner::text
        AND jobs.attempts = held.attempt
        AND jobs.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now()))::boolean
           AS held
FROM jobs
JOIN (SELECT unnest(@ids::uuid[]) AS id, unnest(@attempts::integer[]) AS attempt) AS held
    ON held.id = jobs.id
ORDER BY jobs.id
FOR UPDATE OF jobs;

-- name: JobFinishMany :many
-- Fenced completion: succeeded, or cancelled when a cancel was requested
-- meanwhile. Jobs the owner no longer holds under the lease fence (owner,
-- attempt, unexpired lease) are left alone and not returned.
WITH finished AS (
    UPDATE jobs
    SET state = CASE WHEN cancel_requested THEN 'cancelled'::job_state
                     ELSE 'succeeded'::job_state END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = now(),
        updated_at = now()
    FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@attempts::integer[]) AS attempt) AS held
    WHERE jobs.id = held.id
      AND jobs.attempts = held.attempt
      AND jobs.state = 'leased'
      AND jobs.lease_owner = @owner::text
      AND jobs.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT finished.id, finished.finished_at, finished.state::text, 'leased', finished.state,
           finished.attempts, @owner
    FROM finished
)
SELECT finished.id, finished.state, finished.finished_at FROM finished;

-- name: JobCompleteMany :many
-- The whole completion of jobs without a commit callback in one statement:
-- fenced finish (as JobFinishMany) and events. No ledger row: the ledger
-- records effects that committed, and a job without a callback commits none,
-- so a later run of the same job (a retry, a replayed key) has nothing to skip.
WITH finished AS (
    UPDATE jobs
    SET state = CASE WHEN cancel_requested THEN 'cancelled'::job_state
                     ELSE 'succeeded'::job_state END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = now(),
        updated_at = now()
    FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@attempts::integer[]) AS attempt) AS held
    WHERE jobs.id = held.id
      AND jobs.attempts = held.attempt
      AND jobs.state = 'leased'
      AND jobs.lease_owner = @owner::text
      AND jobs.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT finished.id, finished.finished_at, finished.state::text, 'leased', finished.state,
           finished.attempts, @owner
    FROM finished
)
SELECT finished.id, finished.state, finished.finished_at FROM finished;

-- name: JobFail :one
-- Fenced failure (owner, attempt, unexpired lease): back to queued at
-- retry_at while attempts remain, dead when they are spent, cancelled when a
-- cancel was requested.
WITH failed AS (
    UPDATE jobs
    SET state = CASE WHEN cancel_requested THEN 'cancelled'::job_state
                     WHEN attempts >= max_attempts THEN 'dead'::job_state
                     ELSE 'queued'::job_state END,
        run_at = CASE WHEN cancel_requested OR attempts >= max_attempts THEN run_at
                      ELSE @retry_at::timestamptz END,
        finished_at = CASE WHEN cancel_requested OR attempts >= max_attempts THEN now() END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error = left(@error::text, 8192),
        updated_at = now()
    WHERE jobs.id = @id
      AND jobs.attempts = @attempt::integer
      AND jobs.state = 'leased'
      AND jobs.lease_owner = @owner::text
      AND jobs.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner, detail)
    SELECT failed.id, failed.updated_at,
           CASE failed.state WHEN 'queued' THEN 'failed' ELSE failed.state::text END,
           'leased', failed.state, failed.attempts, @owner, failed.last_error
    FROM failed
)
SELECT * FROM failed;

-- name: JobRelease :one
-- Fenced hand-back (owner, attempt, unexpired lease) of a job the worker stopped without running it to
-- the end (shutdown): queued again, due now, and the attempt is given back,
-- since the job did not fail. A cancel request still ends it cancelled.
WITH released AS (
    UPDATE jobs
    SET state = CASE WHEN cancel_requested THEN 'cancelled'::job_state
                     ELSE 'queued'::job_state END,
        attempts = CASE WHEN cancel_requested THEN attempts ELSE greatest(attempts - 1, 0) END,
        run_at = CASE WHEN cancel_requested THEN run_at ELSE now() END,
        finished_at = CASE WHEN cancel_requested THEN now() END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error = left(@reason::text, 8192),
        updated_at = now()
    WHERE jobs.id = @id
      AND jobs.attempts = @attempt::integer
      AND jobs.state = 'leased'
      AND jobs.lease_owner = @owner::text
      AND jobs.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner, detail)
    SELECT released.id, released.updated_at,
           CASE released.state WHEN 'queued' THEN 'released' ELSE released.state::text END,
           'leased', released.state, released.attempts, @owner, released.last_error
    FROM released
)
SELECT * FROM released;

-- name: JobLockExpired :many
-- Leases that ran out, locked for the reaper; SKIP LOCKED lets reapers on
-- several workers split the work instead of queueing behind each other.
SELECT *
FROM jobs
WHERE state = 'leased' AND lease_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
ORDER BY lease_expires_at
LIMIT @max_jobs
FOR UPDATE SKIP LOCKED;

-- name: JobReapMany :many
-- Apply the reaper's per-job verdicts (queued at a retry time, or dead) in
-- one statement, with their events.
WITH verdicts AS (
    SELECT unnest(@ids::uuid[]) AS id,
           unnest(@states::job_state[]) AS state,
           unnest(@run_ats::timestamptz[]) AS run_at
), reaped AS (
    UPDATE jobs
    SET state = verdicts.state,
        run_at = verdicts.run_at,
        finished_at = CASE WHEN verdicts.state = 'queued' THEN NULL ELSE now() END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        cancel_requested = false,
        last_error = 'lease expired: the worker stopped heartbeating',
        updated_at = now()
    FROM verdicts
    WHERE jobs.id = verdicts.id AND jobs.state = 'leased'
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, detail)
    SELECT reaped.id, reaped.updated_at, 'reaped', 'leased', reaped.state,
           reaped.attempts, reaped.last_error
    FROM reaped
)
SELECT * FROM reaped;

-- name: JobLock :one
SELECT * FROM jobs WHERE id = @id FOR UPDATE;

-- name: JobCancelQueued :one
WITH cancelled AS (
    UPDATE jobs
    SET state = 'cancelled', finished_at = now(), updated_at = now()
    WHERE jobs.id = @id AND jobs.state = 'queued'
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT cancelled.id, cancelled.updated_at, 'cancelled', 'queued', 'cancelled',
           cancelled.attempts
    FROM cancelled
)
SELECT * FROM cancelled;

-- name: JobRequestCancel :one
-- A leased job can't be stopped from here: flag it, and the owner's next
-- heartbeat leaves it out so the worker cancels the handler.
WITH flagged AS (
    UPDATE jobs
    SET cancel_requested = true, updated_at = now()
    WHERE jobs.id = @id AND jobs.state = 'leased'
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT flagged.id, flagged.updated_at, 'cancel_requested', 'leased', 'leased',
           flagged.attempts, flagged.lease_owner
    FROM flagged
)
SELECT * FROM flagged;

-- name: JobRetry :one
-- Dead or cancelled back to queued, due now. A dead job has spent its
-- attempts, so one is given back (the events keep the full count). Its
-- max_attempts stays as enqueued: it is part of the body an idempotent
-- replay is compared with.
WITH retried AS (
    UPDATE jobs
    SET state = 'queued',
        run_at = now(),
        attempts = least(attempts, max_attempts - 1),
        cancel_requested = false,
        finished_at = NULL,
        updated_at = now()
    WHERE jobs.id = @id AND jobs.state IN ('dead', 'cancelled')
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT retried.id, retried.updated_at, 'retried', @from_state::job_state, 'queued',
           retried.attempts
    FROM retried
)
SELECT * FROM retried;

-- name: JobPurge :execrows
-- Delete up to batch_size finished jobs older than the given age, with their
-- events. Ledger rows stay: they outlive their jobs (EffectPrune), so
-- replaying an old idempotency key after a purge cannot run its effect again.
-- Bounded batches keep every lock short.
WITH doomed AS (
    SELECT id
    FROM jobs
    WHERE finished_at < coalesce(sqlc.narg('now')::timestamptz, now()) - @older_than::interval
    ORDER BY finished_at
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
), dropped_events AS (
    DELETE FROM job_events WHERE job_id IN (SELECT id FROM doomed)
)
DELETE FROM jobs WHERE id IN (SELECT id FROM doomed);

-- name: JobList :many
-- A page of jobs, newest first (ids are UUIDv7, ordered by creation). The
-- cursor is the last id of the previous page.
SELECT *
FROM jobs
WHERE (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
  AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
  AND (sqlc.narg('type')::text IS NULL OR type = sqlc.narg('type'))
  AND (sqlc.narg('created_after')::timestamptz IS NULL
       OR created_at >= sqlc.narg('created_after'))
  AND (sqlc.narg('created_before')::timestamptz IS NULL
       OR created_at < sqlc.narg('created_before'))
  AND (sqlc.narg('cursor')::uuid IS NULL OR id < sqlc.narg('cursor'))
ORDER BY id DESC
LIMIT @max_jobs;

-- name: JobDepth :many
SELECT queue, state, count(*)::bigint AS count, min(created_at)::timestamptz AS oldest_created_at
FROM jobs
GROUP BY queue, state
ORDER BY queue, state;
