-- +goose Up
-- Read the queue and the idempotency key back out of an effect-ledger key.
--
-- A ledger row guards an effect key (type, queue, idempotency key; see 00002)
-- for as long as any job with that key may still run: a key replayed after
-- its job was purged is a new job with a new id, and when its turn comes the
-- ledger row must still be there, or its effect commits a second time. So
-- pruning must find the jobs of a row's key, not only the job that wrote it,
-- and find them through jobs_idem_uniq (queue, idempotency_key): these two
-- functions give the index its values.
--
-- They invert job_effect_key for a keyed job's key: quote_literal(queue) ||
-- ':' || key. Inside the quoted queue every quote is doubled, so the first
-- quote that is not doubled ends it; quote_literal also doubles backslashes
-- and then writes an E before the opening quote. An unkeyed job's key (its
-- id) starts with no quote, and both functions return NULL for it.

-- +goose StatementBegin
CREATE FUNCTION job_effect_key_queue(effect_key text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT CASE WHEN left(effect_key, 1) = 'E' THEN replace(quoted, E'\\\\', E'\\')
                ELSE quoted END
    FROM (
        SELECT replace(substring(effect_key FROM $re$^E?'((?:[^']|'')*)':$re$), $q$''$q$, $q$'$q$)
            AS quoted
    ) AS parsed
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION job_effect_key_idempotency_key(effect_key text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    SELECT substr(effect_key, length(quote_literal(job_effect_key_queue(effect_key))) + 2)
$fn$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION job_effect_key_idempotency_key(text);
DROP FUNCTION job_effect_key_queue(text);
