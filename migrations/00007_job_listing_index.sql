-- +goose NO TRANSACTION
-- +goose Up
-- The dashboard and `jobrun jobs list` page through jobs newest first by id
-- (JobList: keyset on id, ids are UUIDv7), usually filtered by state. No
-- index served that filter: the partial indexes cover only queued or leased
-- rows, jobs_finished_state_idx orders by finished_at, not id. So "the dead
-- jobs" walked the primary key backwards and dropped every succeeded job on
-- the way: on a million jobs with 0.5% dead, 10,000 rows read per page of 50,
-- and every row of the table when the filter matched none. (state, id) is the
-- listing's own order: a page is one range scan that reads what it returns.
-- The planner can use it for JobList's `(state IS NULL OR state = $2)`
-- because PostgreSQL plans that statement with its parameters (a generic plan
-- is estimated far costlier, so the plan cache keeps choosing custom plans).
-- Its price: one more index entry per insert and state change, on a table
-- whose updates are never HOT anyway (state is already indexed).
--
-- Built CONCURRENTLY, outside a transaction, for the reasons 00006 gives: jobs
-- is the live, hot table. IF NOT EXISTS makes a run stopped half-way safe to
-- repeat; an index left INVALID by an interrupted build must be dropped by
-- hand first.
-- (squawk assumes every file runs in a transaction; this one says NO TRANSACTION.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_state_id_idx ON jobs (state, id);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS jobs_state_id_idx;
