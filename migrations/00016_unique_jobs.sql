-- +goose NO TRANSACTION
-- +goose Up
-- Uniqueness policies (NewJob.unique): a job may hold a key that no other
-- job holds while either of them is in one of the states its policy names.
--
-- unique_key is what the policy made of the job (its type and the chosen
-- part of its payload, hashed, with the period's bucket when it has one);
-- unique_states the states in which the job holds it, one bit per state
-- (job_state_bit: an integer, not a job_state[], which the generated query
-- layer cannot read back from SELECT *). The partial unique
-- index below is the whole rule: a job is in it while its state is one of
-- its unique_states, so a job that moves out (a "unique while queued or
-- running" job that finishes) frees its key without any statement doing it,
-- and an enqueue that finds the key held inserts nothing (ON CONFLICT DO
-- NOTHING) and returns the job that holds it. A job without a policy has
-- NULL in both and never enters the index: enqueues, claims and completions
-- of such jobs evaluate its predicate and stop at the NULL.
--
-- Two nullable columns without a default: a catalog-only change; the
-- lock_timeout keeps the instant of ACCESS EXCLUSIVE lock it needs from
-- queueing every claim behind a reader. The index is built CONCURRENTLY,
-- outside a transaction, as 00006 and 00007 build theirs (jobs is the hot
-- table); on an existing table it holds nothing, every row having NULL keys.
-- IF NOT EXISTS makes a run stopped half-way safe to repeat; an index left
-- INVALID by an interrupted build must be dropped by hand first.
SET lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text,
    ADD COLUMN IF NOT EXISTS unique_states integer;
RESET lock_timeout;

-- A state's bit in unique_states. IMMUTABLE (it compares enum values, which
-- never change meaning), so the index predicate below may call it.
CREATE OR REPLACE FUNCTION job_state_bit(state job_state)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE state
    WHEN 'queued' THEN 1 WHEN 'leased' THEN 2 WHEN 'succeeded' THEN 4
    WHEN 'cancelled' THEN 8 WHEN 'dead' THEN 16
END;

-- (squawk assumes every file runs in a transaction; this one says NO TRANSACTION.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_unique_key_idx ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND (unique_states & job_state_bit(state)) <> 0;

-- The key a policy's base makes now: the base itself, or with a period the
-- base and the number of the period that now falls in (periods counted from
-- the Unix epoch), so that every producer buckets on the database's clock.
-- One function for the insert and the read of the holder, which must agree.
CREATE OR REPLACE FUNCTION job_unique_key(base text, period interval)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN period IS NULL THEN base
            ELSE base || '/' || floor(extract(epoch FROM now()) / extract(epoch FROM period))::bigint
       END;

-- +goose Down
DROP FUNCTION IF EXISTS job_unique_key(text, interval);
DROP INDEX CONCURRENTLY IF EXISTS jobs_unique_key_idx;
DROP FUNCTION IF EXISTS job_state_bit(job_state);
SET lock_timeout = '5s';
-- squawk-ignore ban-drop-column
ALTER TABLE jobs DROP COLUMN IF EXISTS unique_states;
-- squawk-ignore ban-drop-column
ALTER TABLE jobs DROP COLUMN IF EXISTS unique_key;
RESET lock_timeout;
