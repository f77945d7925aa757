-- +goose NO TRANSACTION
-- +goose Up
-- Retention purges finished jobs one state at a time (succeeded after a day,
-- dead after two weeks, ...). jobs_finished_idx orders every finished job by
-- finished_at alone, so a pass over succeeded jobs would first walk, and fetch
-- from the heap, every dead and cancelled job older than the succeeded cutoff
-- (two weeks of them), again for each batch. This index serves
-- `state = X AND finished_at < cutoff ORDER BY finished_at` as one range scan.
-- Built concurrently: the jobs table is written to all the time.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished_state_idx
    ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_finished_state_idx;
