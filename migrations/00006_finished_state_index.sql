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

-- +goose Down
DROP INDEX IF EXISTS jobs_finished_state_idx;
