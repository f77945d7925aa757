-- Queries on processed_effects, the ledger that makes effects exactly-once.

-- The ledger key of a job is computed by job_effect_scope and job_effect_key
-- (migration 00002) and nowhere else.

-- name: EffectInsertMany :many
-- Record the effects of jobs their completion has just left succeeded (in
-- the same transaction); returns the job ids whose row is new: exactly the
-- jobs whose commit callback must run. A job missing from the result either
-- had its effect committed already, or was left cancelled because a cancel
-- was requested before its completion (job_outcome_state, migration 00003):
-- the cancel wins, so its effect is skipped and the job's state and its
-- effect never disagree.
-- plan: jobs only by index jobs_pkey
INSERT INTO processed_effects (scope, key, job_id)
SELECT job_effect_scope(type), job_effect_key(queue, idempotency_key, id), id
FROM jobs
WHERE id = ANY(@job_ids::uuid[])
  AND state = 'succeeded'
ORDER BY id
ON CONFLICT (scope, key) DO NOTHING
RETURNING job_id;

-- name: EffectKeyOf :one
-- The (scope, key) of a job's effect in the ledger.
SELECT job_effect_scope(@type::text)::text AS scope,
       job_effect_key(@queue::text, sqlc.narg('idempotency_key')::text, @id::uuid)::text AS key;

-- name: EffectExists :one
-- plan: index processed_effects_pkey
SELECT EXISTS (
    SELECT 1 FROM processed_effects
    WHERE scope = job_effect_scope(@type::text)
      AND key = job_effect_key(@queue::text, sqlc.narg('idempotency_key')::text, @id::uuid)
) AS done;

-- name: EffectPrune :execrows
-- Delete up to batch_size ledger rows older than the given age that no job
-- may still need: neither the job that wrote the row nor any other job of the
-- same effect key (type, queue, idempotency key), in any state, exists. A key
-- replayed after its job was purged is a new job; its row stays until that
-- job is gone too and the row is past its age, so the replay's effect is
-- skipped when it runs. The ledger always lives at least as long as the jobs
-- it guards. processed_effects_created_brin (migration 00006) finds the old
-- rows without scanning the ledger; the jobs of a row's key are one probe of
-- jobs_idem_uniq each (job_effect_key_queue, migration 00011).
-- plan: index processed_effects_created_brin; jobs only by index jobs_pkey, jobs_idem_uniq
DELETE FROM processed_effects
WHERE (scope, key) IN (
    SELECT effect.scope, effect.key
    FROM processed_effects AS effect
    WHERE effect.created_at < coalesce(sqlc.narg('now')::timestamptz, now()) - @older_than::interval
      AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = effect.job_id)
      AND NOT EXISTS (
          SELECT 1 FROM jobs
          WHERE jobs.queue = job_effect_key_queue(effect.key)
            AND jobs.idempotency_key = job_effect_key_idempotency_key(effect.key)
            AND job_effect_scope(jobs.type) = effect.scope
      )
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
);

-- name: TransactionSetStatementTimeout :exec
-- Bound the rest of the current transaction only (is_local = true).
SELECT set_config('statement_timeout', @timeout::text, true);
