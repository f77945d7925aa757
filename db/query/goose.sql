-- Bookkeeping queries of the migration runner (jobrun.postgres.migrate), on goose's
-- own goose_db_version table (created by src/jobrun/postgres/goose_bootstrap.sql),
-- so the goose CLI and jobrun can migrate the same database.

-- name: GooseVersionList :many
-- Every row in insertion order; the last row of a version says whether it is applied.
SELECT id, version_id, is_applied, tstamp
FROM goose_db_version
ORDER BY id;

-- name: GooseVersionInsert :exec
INSERT INTO goose_db_version (version_id, is_applied)
VALUES (sqlc.arg(version_id), sqlc.arg(is_applied));

-- name: GooseLockTry :one
-- Session-level: held across the per-file transactions until GooseLockRelease.
-- Tried, never waited for: a session waiting inside pg_advisory_lock holds a
-- snapshot, and CREATE INDEX CONCURRENTLY in the lock holder's migration
-- waits for every such snapshot to go away: a deadlock.
SELECT pg_try_advisory_lock(sqlc.arg(lock_key)::bigint) AS acquired;

-- name: GooseLockRelease :one
SELECT pg_advisory_unlock(sqlc.arg(lock_key)::bigint) AS released;

-- name: GooseTableExists :one
-- Lets `migrate status` read a database without creating anything in it.
SELECT (to_regclass('goose_db_version') IS NOT NULL)::boolean AS present;
