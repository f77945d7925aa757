-- +goose Up
-- Every VACUUM of jobs cleans its indexes, however few of its pages hold dead
-- rows.
--
-- Since PostgreSQL 14, a VACUUM that finds dead rows on fewer than 2% of a
-- table's pages skips its indexes (INDEX_CLEANUP auto). On a big jobs table
-- that is every vacuum between a handful of busy minutes: the rows of jobs
-- claimed since then are gone from the heap, but their entries stay in
-- jobs_claim_idx, at the head of each queue's priority level, where every
-- claim starts its descent and has to step over them. Measured on a table of
-- 10M finished and 1M delayed jobs, 20,000 jobs drained and the table
-- vacuumed: an idle claim took 0.37 ms with the entries left in place, 0.28
-- ms once the indexes were cleaned (as on a table of 44 rows), and the
-- vacuum that cleans them took 0.2 s. On a small table the dead rows of a
-- few minutes' work cover more than 2% of its pages, so only a big one paid.
--
-- A storage parameter: no rewrite, and a SHARE UPDATE EXCLUSIVE lock that
-- conflicts only with other vacuums and schema changes, never with claims or
-- enqueues; the lock_timeout keeps it from waiting behind a running vacuum.
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs SET (vacuum_index_cleanup = on);

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs RESET (vacuum_index_cleanup);
