-- Queries of `jobrun demo` on its fixture table (src/jobrun/postgres/demo_schema.sql).

-- name: DemoEffectInsert :exec
INSERT INTO demo_effects (job_id) VALUES (@job_id);

-- name: DemoEffectCount :one
SELECT count(*)::bigint AS effects FROM demo_effects WHERE job_id = ANY(@job_ids::uuid[]);
