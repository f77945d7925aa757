-- Queries of the plan checks and benchmarks (jobrun_tools), never of jobrun itself:
-- generated into jobrun_tools/sqlc, which the wheel does not ship.

-- name: JobFillSynthetic :execrows
-- Insert total synthetic jobs of one queue in one statement, for the claim
-- benchmark (scripts/bench-claim) and the plan check of the claim
-- tests, which need millions of rows in minutes. Job g (1..total)
-- gets priority g mod priorities, run_at db now + run_in + g * spacing, and
-- finished_at (set it exactly for a finished state). Ids are first_id + g
-- written as a uuid, so rows arrive in id order and the primary key grows at
-- its right edge; the caller keeps the id ranges of its calls apart.
INSERT INTO jobs (id, queue, type, priority, state, run_at, finished_at)
-- sqlc.arg, not @, before an operator: PostgreSQL reads @ as a prefix
-- operator, which would take the whole sum as its operand.
SELECT lpad(to_hex(sqlc.arg('first_id')::bigint + g), 32, '0')::uuid,
       @queue::text,
       'synthetic',
       mod(g, @priorities::integer)::smallint,
       @state::job_state,
       coalesce(sqlc.narg('now')::timestamptz, now()) + sqlc.arg('run_in')::interval
           + sqlc.arg('spacing')::interval * g,
       sqlc.narg('finished_at')::timestamptz
FROM generate_series(1, @total::bigint) AS g;

-- name: JobsAnalyze :exec
-- Refresh the planner statistics of jobs (a plan check fills it first).
-- EXPLAIN cannot take ANALYZE, so sqlc vet leaves it out.
-- @sqlc-vet-disable
ANALYZE jobs;

-- name: PreparedStatementPlans :many
-- How often each statement prepared on this session was planned with its
-- values (custom) and how often it reused its generic plan; the claim-plan
-- checks read it to prove the claim is not planned afresh on every call.
SELECT statement, generic_plans, custom_plans
FROM pg_catalog.pg_prepared_statements
ORDER BY statement;

-- name: JobFillWaitingLinks :execrows
-- Give every waiting job a concurrency key (one of `keys` keys, limit 2,
-- waiting its turn) and one dependency on a finished job, so that the
-- waiting jobs of the claim benchmark's database are of both kinds, and
-- the tables the completion probes are full.
WITH waiting AS (
    SELECT jobs.id, row_number() OVER (ORDER BY jobs.id) AS n
    FROM jobs WHERE jobs.state = 'waiting'
), slots AS (
    INSERT INTO job_concurrency (job_id, key, key_limit)
    SELECT waiting.id, 'key:' || (waiting.n % @keys::bigint), 2 FROM waiting
)
INSERT INTO job_dependencies (depends_on, job_id, if_failed)
SELECT (SELECT jobs.id FROM jobs WHERE jobs.state = 'succeeded' ORDER BY jobs.id LIMIT 1),
       waiting.id, 'cancel'
FROM waiting;
