-- Server-level queries that belong to no table.

-- name: DatabaseNow :one
-- The database clock; also the ping run when a pool opens.
SELECT now()::timestamptz AS now;
