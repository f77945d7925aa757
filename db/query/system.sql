-- Server-level queries that belong to no table.

-- name: DatabaseNow :one
-- The database clock; also the ping run when a pool opens.
SELECT now()::timestamptz AS now;

-- name: PreparedStatementPlans :many
-- How often each statement prepared on this session was planned with its
-- values (custom) and how often it reused its generic plan; the claim-plan
-- checks read it to prove the claim is not planned afresh on every call.
SELECT statement, generic_plans, custom_plans
FROM pg_catalog.pg_prepared_statements
ORDER BY statement;
