-- +goose Up
-- Retention purges finished jobs one state at a time (succeeded after a day,
-- dead after two weeks, ...). jobs_finished_idx orders every finished job by
-- finished_at alone, so a pass over succeeded jobs would first walk, and fetch
-- from the heap, every dead and cancelled job older than the succeeded cutoff
-- (two weeks of them), again for each batch. This index serves
-- `state = X AND finished_at < cutoff ORDER BY finished_at` as one range scan.
--
-- Not CONCURRENTLY: jobrun's runner holds a session advisory lock while it
-- migrates, and a second runner waiting for that lock is a transaction that
-- CREATE INDEX CONCURRENTLY waits for, a deadlock. A plain build blocks writes
-- to jobs while it runs (well under a second for a table of a few hundred
-- thousand rows). On a very large jobs table, build the same index by hand
-- first, without blocking anyone; this migration then does nothing:
--   CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished_state_idx
--       ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_finished_state_idx
    ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;

-- The ledger is pruned by age every maintenance tick, and most ticks find
-- nothing old enough: without an index on created_at that is a sequential
-- scan of the whole ledger (90 days of effects) every minute. Rows are
-- inserted in created_at order (its default is now()), so, as for
-- job_events.at, a BRIN index of a few pages answers "nothing older than the
-- cutoff" at once.
CREATE INDEX IF NOT EXISTS processed_effects_created_brin
    ON processed_effects USING brin (created_at);

-- +goose Down
DROP INDEX IF EXISTS processed_effects_created_brin;
DROP INDEX IF EXISTS jobs_finished_state_idx;
