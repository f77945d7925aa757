-- Advisory locks for leader election (jobrun.postgres.lock). Each held lock lives
-- on its own dedicated connection, so the server releases it the moment that
-- connection dies, whoever killed it. Session-level on a direct connection;
-- transaction-level, in a transaction kept open, through PgBouncer in transaction
-- mode (a session lock would stay on a server connection the bouncer hands to
-- other clients).

-- name: AdvisoryLockTry :one
-- Never blocks: false when another session holds the key.
SELECT pg_try_advisory_lock(sqlc.arg(key)::bigint) AS acquired;

-- name: AdvisoryXactLockTry :one
-- Never blocks: false when another transaction holds the key. The lock lasts
-- until the caller's transaction ends, which pins its server connection to it.
SELECT pg_try_advisory_xact_lock(sqlc.arg(key)::bigint) AS acquired;

-- name: AdvisoryUnlock :one
SELECT pg_advisory_unlock(sqlc.arg(key)::bigint) AS released;

-- name: AdvisoryLockHeld :one
-- The keep-alive probe: a round trip that also proves this session still holds
-- the lock. pg_locks splits a bigint key into classid (high 32 bits) and objid
-- (low 32 bits); objsubid 1 marks the single-bigint form. Schema-qualified because
-- sqlc's offline catalog only resolves pg_catalog relations by their full name.
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_locks
    WHERE locktype = 'advisory'
      AND pid = pg_backend_pid()
      AND granted
      AND objsubid = 1
      AND classid = ((sqlc.arg(key)::bigint >> 32) & 4294967295)::oid
      AND objid = (sqlc.arg(key)::bigint & 4294967295)::oid
) AS held;

-- name: KeyLockMany :exec
-- Transaction-scoped locks on application keys (64-bit ids), taken in ascending
-- order: every transaction that locks several keys takes them in one global
-- order, so two of them can wait on each other but never deadlock. The ordered
-- subquery feeds the aggregate one id at a time, lowest first.
SELECT count(pg_advisory_xact_lock(ordered.id))::bigint AS locked
FROM (SELECT DISTINCT unnest(@ids::bigint[]) AS id ORDER BY id) AS ordered;

-- name: AdvisoryLockHeldAny :one
-- The probe of a transaction-scoped lock, whose connection holds that one lock
-- and nothing else. Without parameters psycopg sends it in the simple protocol,
-- which leaves no portal open behind it: between probes the holder's
-- transaction keeps no snapshot (no xmin), so however long it leads it holds
-- back no vacuum. (An extended-protocol statement's unnamed portal keeps its
-- snapshot until the next statement.)
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_locks
    WHERE locktype = 'advisory'
      AND pid = pg_backend_pid()
      AND granted
      AND objsubid = 1
) AS held;
