-- +goose NO TRANSACTION
-- +goose Up
-- Retention purges finished jobs one state at a time (succeeded after a day,
-- dead after two weeks, ...). jobs_finished_idx orders every finished job by
-- finished_at alone, so a pass over succeeded jobs would first walk, and fetch
-- from the heap, every dead and cancelled job older than the succeeded cutoff
-- (two weeks of them), again for each batch. This index serves
-- `state = X AND finished_at < cutoff ORDER BY finished_at` as one range scan.
--
-- Built CONCURRENTLY, outside a transaction: jobs is the live, hot table, and a
-- plain build would block every claim and completion while it runs. (jobrun's
-- runner polls for its migration lock instead of waiting in it, so a second
-- runner never holds a snapshot this build would wait for.) Each statement is
-- idempotent, so a migration stopped half-way can simply run again; an index
-- left INVALID by an interrupted build must be dropped by hand first.
-- (squawk assumes every file runs in a transaction; this one says NO TRANSACTION.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished_state_idx
    ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;

-- The ledger is pruned by age every maintenance tick, and most ticks find
-- nothing old enough: without an index on created_at that is a sequential
-- scan of the whole ledger (90 days of effects) every minute. Rows are
-- inserted in created_at order (its default is now()), so, as for
-- job_events.at, a BRIN index of a few pages answers "nothing older than the
-- cutoff" at once.
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS processed_effects_created_brin
    ON processed_effects USING brin (created_at);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS processed_effects_created_brin;
DROP INDEX CONCURRENTLY IF EXISTS jobs_finished_state_idx;
