-- The migration review of the plan report (jobrun_tools.plans.review): what a
-- migration's statements lock, rewrite and read, seen from the session that
-- runs them. Generated into jobrun_tools/sqlc, which the wheel does not ship.

-- name: ReviewRelations :many
-- Every table and index of the current schema with the file that stores it:
-- a statement that rewrites a relation gives it a new file.
SELECT c.relname::text AS name, c.relkind::text AS kind, c.relfilenode::bigint AS file_node,
       greatest(c.reltuples, 0)::bigint AS tuples
FROM pg_catalog.pg_class AS c
WHERE c.relnamespace = current_schema()::regnamespace
  AND c.relkind IN ('r', 'i', 'p', 'm')
ORDER BY c.relname;

-- name: ReviewLocks :many
-- The relation locks this session holds now (in its open transaction).
SELECT c.relname::text AS name, l.mode::text AS mode
FROM pg_catalog.pg_locks AS l
JOIN pg_catalog.pg_class AS c ON c.oid = l.relation
WHERE l.pid = pg_backend_pid()
  AND l.locktype = 'relation'
  AND l.granted
  AND c.relnamespace = current_schema()::regnamespace
ORDER BY c.relname, l.mode;

-- name: ReviewTableActivity :many
-- What this session's open transaction has read and written, per table.
SELECT s.relname::text AS name,
       coalesce(s.seq_scan, 0)::bigint AS seq_scans,
       coalesce(s.seq_tup_read, 0)::bigint AS seq_rows,
       coalesce(s.idx_scan, 0)::bigint AS index_scans,
       (coalesce(s.n_tup_ins, 0) + coalesce(s.n_tup_upd, 0) + coalesce(s.n_tup_del, 0))::bigint
           AS written
FROM pg_catalog.pg_stat_xact_user_tables AS s
WHERE s.schemaname = current_schema()
ORDER BY s.relname;
