-- +goose NO TRANSACTION
-- +goose Up
-- Dependencies between jobs (NewJob.depends_on): a job enqueued with
-- dependencies that have not all ended waits in a state of its own,
-- 'waiting', which the claim never reads (its index holds queued jobs only),
-- so waiting jobs cost the claim nothing. The statement that records a
-- dependency's outcome moves each dependent whose dependencies have now all
-- ended to 'queued' (or to 'cancelled', when one of them ended dead or
-- cancelled and the dependent said so), in the same transaction; the
-- maintenance leader settles the rest (a dependency a reaper or an operator
-- ended, a dependent enqueued while its last dependency was committing).
--
-- ADD VALUE cannot run inside a transaction block with the value's first
-- use, hence NO TRANSACTION: each statement commits on its own, and the
-- index below can name the new value.
ALTER TYPE job_state ADD VALUE IF NOT EXISTS 'waiting' AFTER 'dead';

-- One row per (dependency, dependent): if_failed says what a dependency
-- that ends dead or cancelled does to the dependent ('cancel' it, or 'run'
-- it anyway). Keyed by the dependency first: the completion looks up the
-- dependents of the jobs it ends. A new table: no lock on anything that exists.
CREATE TABLE IF NOT EXISTS job_dependencies (
    depends_on uuid NOT NULL,
    job_id     uuid NOT NULL,
    if_failed  text NOT NULL DEFAULT 'cancel',
    PRIMARY KEY (depends_on, job_id),
    CONSTRAINT job_dependencies_if_failed_valid CHECK (if_failed IN ('cancel', 'run')),
    CONSTRAINT job_dependencies_not_self CHECK (depends_on <> job_id)
);
CREATE INDEX IF NOT EXISTS job_dependencies_job_idx ON job_dependencies (job_id);

-- The waiting jobs in enqueue order, for the maintenance leader's settling
-- pass (built CONCURRENTLY: jobs is the hot table; it holds nothing yet).
-- (squawk assumes every file runs in a transaction; this one says NO TRANSACTION.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_waiting_idx ON jobs (created_at, id)
    WHERE state = 'waiting';

-- +goose Down
-- A value cannot be dropped from an enum type: 'waiting' stays (unused).
DROP INDEX CONCURRENTLY IF EXISTS jobs_waiting_idx;
DROP TABLE IF EXISTS job_dependencies;
