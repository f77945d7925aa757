-- +goose NO TRANSACTION
-- +goose Up
-- Two indexes fewer to write on the hottest path.
--
-- Every claim wrote the leased job into two indexes of leased rows:
-- jobs_lease_idx (lease_expires_at, 00001), which the reaper reads, and
-- jobs_leased_queue_idx (queue, 00004), which counts a queue's running jobs
-- for concurrency limits and stats. One index (queue, lease_expires_at) of
-- leased rows serves both: the count reads the queue's range of it, and the
-- reaper reads all of it and keeps the expired leases. Either way what is read
-- is bounded by the jobs running right now, never by the table's size.
--
-- Every event wrote an entry into job_events_at_brin (at), which only the
-- pruning of old events read. Pruning now walks the primary key from the
-- oldest id instead (ids follow insertion, and so, within the length of one
-- transaction, `at`), so that index goes.
--
-- Together they were about 6 of the 44 buffers a no-op job touched from
-- claim to completion, and a tenth of the server's CPU for it.
--
-- Built and dropped CONCURRENTLY, outside a transaction: jobs is the live,
-- hot table (see 00006). The new index exists before the old ones go, and
-- every statement is idempotent, so a run stopped half-way can be repeated.
-- (squawk assumes every file runs in a transaction; this one says NO TRANSACTION.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_leased_idx ON jobs (queue, lease_expires_at)
    WHERE state = 'leased';
DROP INDEX CONCURRENTLY IF EXISTS jobs_lease_idx;
DROP INDEX CONCURRENTLY IF EXISTS jobs_leased_queue_idx;
DROP INDEX CONCURRENTLY IF EXISTS job_events_at_brin;

-- +goose Down
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS job_events_at_brin ON job_events USING brin (at);
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_leased_queue_idx ON jobs (queue)
    WHERE state = 'leased';
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_lease_idx ON jobs (lease_expires_at)
    WHERE state = 'leased';
DROP INDEX CONCURRENTLY IF EXISTS jobs_leased_idx;
