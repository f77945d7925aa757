-- Server-level queries that belong to no table.

-- name: DatabaseNow :one
-- The database clock; also the ping run when a pool opens.
SELECT now()::timestamptz AS now;

-- name: TablesOutgrowingStatistics :many
-- jobrun's growing tables whose planner statistics describe a much smaller
-- table: more than twice the rows (and a thousand more) live now than when
-- they were last analyzed, or never analyzed at all. Each session keeps a
-- generic plan of every statement it prepared, costed with the statistics
-- of that moment; one made while a table was nearly empty reads the whole
-- table (a hash join is cheapest there) and stays until the statistics
-- change: a claim planned on an empty jobs table takes some 100 times as long
-- once the table holds 500,000 rows (scripts/bench-claim --grown measures
-- it). Autovacuum's analyze fixes that within its naptime;
-- with autovacuum off, nothing would. Only tables this role may analyze.
SELECT c.relname::text AS name
FROM pg_catalog.pg_class AS c
WHERE c.oid = ANY (ARRAY[to_regclass('jobs'), to_regclass('job_events'),
                         to_regclass('processed_effects')]::oid[])
  AND pg_catalog.pg_stat_get_live_tuples(c.oid) > 2 * greatest(c.reltuples, 0) + 1000
  AND pg_catalog.pg_has_role(c.relowner, 'USAGE')
ORDER BY c.relname;

-- name: AnalyzeJobs :exec
-- Refresh the statistics of jobs, unless someone (autovacuum) is at it.
-- @sqlc-vet-disable
ANALYZE (SKIP_LOCKED) jobs;

-- name: AnalyzeJobEvents :exec
-- Refresh the statistics of job_events, unless someone (autovacuum) is at it.
-- @sqlc-vet-disable
ANALYZE (SKIP_LOCKED) job_events;

-- name: AnalyzeProcessedEffects :exec
-- Refresh the statistics of processed_effects, unless someone (autovacuum) is at it.
-- @sqlc-vet-disable
ANALYZE (SKIP_LOCKED) processed_effects;

-- name: ReplicaLag :one
-- Whether this server is a standby, and what its lag is made of: whether it
-- has replayed all the WAL it received, whether it has replayed any
-- transaction since it started, and how long ago (by this server's clock)
-- the last one it replayed committed on the primary (0 when none).
SELECT pg_catalog.pg_is_in_recovery() AS standby,
       pg_catalog.pg_last_wal_receive_lsn() IS NOT DISTINCT FROM
         pg_catalog.pg_last_wal_replay_lsn() AS replayed_all,
       (pg_catalog.pg_last_xact_replay_timestamp() IS NOT NULL)::boolean AS replayed_any,
       coalesce(extract(epoch FROM now() - pg_catalog.pg_last_xact_replay_timestamp()),
                0)::float8 AS seconds_since_replay;
