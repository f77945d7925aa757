-- +goose NO TRANSACTION
-- +goose Up
-- Two things the web dashboard needs: an index for its job listings, and a
-- place to record who paused or limited a queue or a schedule.
--
-- The dashboard and `jobrun jobs list` page through jobs newest first by id
-- (JobList: keyset on id, ids are UUIDv7), often filtered by state, and the
-- states an operator looks for are the rare ones: dead and cancelled. No
-- index served them (jobs_finished_state_idx orders by finished_at, not id),
-- so "the dead jobs" walked the primary key backwards and dropped every
-- succeeded job on the way: on a million jobs with 0.5% dead, 10,000 rows
-- read per page of 50, and every row of the table when the filter matched
-- none. (state, id) is the listing's own order: a page is one range scan that
-- reads what it returns. The other states need no new index: succeeded is
-- most of the table, so the primary key finds it at once; queued and leased
-- have their partial indexes (00001), and recent jobs are mostly queued.
--
-- Partial, because a full (state, id) index would be written by the hot
-- path: an entry on every enqueue, claim and completion (measured: 14% more
-- WAL per job; its time cost was within the noise of the machine). Jobs enter
-- this one only when they die or are cancelled, and it stays small (336 kB
-- against 39 MB for a full one, on a million jobs with 0.8% dead or
-- cancelled). The planner can use it for JobList's
-- `(state IS NULL OR state = $2)` because PostgreSQL plans that statement
-- with its parameters, which prove the index's predicate (a generic plan is
-- estimated far costlier, so the plan cache keeps choosing custom plans).
--
-- Built CONCURRENTLY, outside a transaction, for the reasons 00006 gives: jobs
-- is the live, hot table. IF NOT EXISTS makes a run stopped half-way safe to
-- repeat; an index left INVALID by an interrupted build must be dropped by
-- hand first.
-- (squawk assumes every file runs in a transaction; this one says NO TRANSACTION.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_dead_cancelled_idx ON jobs (state, id)
    WHERE state IN ('dead', 'cancelled');

-- Who last paused, resumed or limited a queue or a schedule (the dashboard's
-- "ops via web"; NULL: not recorded, e.g. a change made without an actor).
-- A job action records its actor in job_events; these controls have no job,
-- so the row they change carries it, beside its updated_at. Nullable, no
-- default: adding it rewrites nothing. The bound is checked by the same
-- statement on two small tables (a row per controlled queue or schedule).
-- Every claim reads queues and the scheduler locks schedules: an ALTER
-- waiting for its lock would queue them all behind it, so it gives up instead
-- (session-wide here, outside a transaction, and reset after).
SET lock_timeout = '5s';
ALTER TABLE queues ADD COLUMN IF NOT EXISTS changed_by text
    CONSTRAINT queues_changed_by_bounded CHECK (length(changed_by) <= 255);
ALTER TABLE schedules ADD COLUMN IF NOT EXISTS changed_by text
    CONSTRAINT schedules_changed_by_bounded CHECK (length(changed_by) <= 255);
RESET lock_timeout;

-- +goose Down
SET lock_timeout = '5s';
-- squawk-ignore ban-drop-column
ALTER TABLE schedules DROP COLUMN IF EXISTS changed_by;
-- squawk-ignore ban-drop-column
ALTER TABLE queues DROP COLUMN IF EXISTS changed_by;
RESET lock_timeout;
DROP INDEX CONCURRENTLY IF EXISTS jobs_dead_cancelled_idx;
