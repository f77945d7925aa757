-- Queries on processed_effects, the ledger that makes effects exactly-once.

-- name: EffectInsertMany :many
-- Record effects; returns the job ids whose row is new. A job missing from the
-- result already had its effect committed, so its callback must not run again.
INSERT INTO processed_effects (scope, key, job_id)
SELECT unnest(@scopes::text[]), unnest(@keys::text[]), unnest(@job_ids::uuid[])
ON CONFLICT (scope, key) DO NOTHING
RETURNING job_id;

-- name: EffectExists :one
SELECT EXISTS (
    SELECT 1 FROM processed_effects WHERE scope = @scope AND key = @key
) AS done;

-- name: TransactionSetStatementTimeout :exec
-- Bound the rest of the current transaction only (is_local = true).
SELECT set_config('statement_timeout', @timeout::text, true);
