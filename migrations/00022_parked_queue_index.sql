-- +goose NO TRANSACTION
-- +goose Up
-- The dashboard's overview counts each queue's waiting, dead and cancelled
-- jobs. Read through jobs_waiting_idx and jobs_dead_cancelled_idx, which do
-- not hold the queue, every one of those jobs costs a visit to the table:
-- on ten million jobs with a few hundred thousand of them, most of a second
-- on every live refresh. This index holds the queue and the state of those
-- jobs only, so the count is an index-only scan. Only the jobs that enter
-- these states write to it; a job that is enqueued, claimed and succeeds
-- never does.
--
-- Its second condition is always true (queue is NOT NULL) and is there to
-- keep the planner from taking this index for queries that do not ask for
-- it: a listing or a search of dead jobs newest first must walk
-- jobs_dead_cancelled_idx in id order, not read every dead job here and
-- sort them. A query uses this index only when it says `queue IS NOT NULL`.
--
-- Built CONCURRENTLY, outside a transaction: jobs is the live, hot table.
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_parked_queue_idx ON jobs (queue, state)
    WHERE state IN ('waiting', 'dead', 'cancelled') AND queue IS NOT NULL;

-- +goose Down
-- squawk-ignore ban-concurrent-index-creation-in-transaction
DROP INDEX CONCURRENTLY IF EXISTS jobs_parked_queue_idx;
