-- +goose Up
-- The effect ledger's key must name exactly what an idempotency key names.
-- Idempotency keys are unique per queue, so two jobs of one type may carry the
-- same key in two queues; the first version keyed the ledger by (type, key)
-- alone, and the second job's commit callback was skipped as if its effect had
-- already committed. From here on the rule lives in these two functions and
-- nowhere else: every query that writes, reads or deletes ledger rows calls
-- them.
--
-- The key of a keyed job quotes its queue (quote_literal doubles any quote
-- inside it), so the queue ends exactly at the closing quote and no choice of
-- queue and key can spell another pair. An unkeyed job's key is its id, which
-- never starts with a quote.

-- +goose StatementBegin
CREATE FUNCTION job_effect_scope(job_type text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT 'job:' || job_type $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION job_effect_key(job_queue text, job_idempotency_key text, job_id uuid)
    RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN job_idempotency_key IS NULL THEN job_id::text
                ELSE quote_literal(job_queue) || ':' || job_idempotency_key END
$$;
-- +goose StatementEnd

-- Ledger rows of keyed jobs that still exist move to the new key. Rows whose
-- job was already purged cannot be told apart by queue and keep the old form.
UPDATE processed_effects
SET key = job_effect_key(jobs.queue, jobs.idempotency_key, jobs.id)
FROM jobs
WHERE processed_effects.job_id = jobs.id
  AND jobs.idempotency_key IS NOT NULL
  AND processed_effects.scope = job_effect_scope(jobs.type);

-- +goose Down
UPDATE processed_effects
SET key = jobs.idempotency_key
FROM jobs
WHERE processed_effects.job_id = jobs.id
  AND jobs.idempotency_key IS NOT NULL
  AND processed_effects.scope = job_effect_scope(jobs.type);
DROP FUNCTION job_effect_key(text, text, uuid);
DROP FUNCTION job_effect_scope(text);
