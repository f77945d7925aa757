-- Jobs that wait for others (NewJob.depends_on, migration 00018).

-- name: JobInsertDependent :one
-- Insert a job with dependencies, its edges, its event and, when it is
-- queued at once, its queue's wake-up. Its state follows its dependencies
-- as they are now: every one succeeded (or ended, with if_failed 'run'):
-- queued; one ended dead or cancelled with if_failed 'cancel': cancelled;
-- otherwise waiting. Nothing is written when a dependency does not exist
-- (unknown counts them): a dependency must be enqueued first, so no cycle
-- can form. The dependencies' rows are locked FOR SHARE while they are
-- read, so one whose outcome is committing is read once it committed. A
-- waiting job's row in job_waits lists the dependencies not ended yet.
-- plan: jobs only by index jobs_pkey
WITH deps AS MATERIALIZED (
    SELECT wanted.id, found.state
    FROM unnest(@depends_on::uuid[]) AS wanted (id)
    LEFT JOIN LATERAL (
        SELECT jobs.state FROM jobs WHERE jobs.id = wanted.id FOR SHARE
    ) AS found ON true
), verdict AS (
    SELECT count(*) FILTER (WHERE deps.state IS NULL)::integer AS unknown,
           count(*) FILTER (WHERE deps.state IN ('dead', 'cancelled'))::integer AS failed,
           count(*) FILTER (WHERE deps.state = 'succeeded')::integer AS done,
           count(*)::integer AS total
    FROM deps
), decided AS (
    SELECT verdict.unknown,
           (CASE WHEN verdict.failed > 0 AND @if_failed::text = 'cancel' THEN 'cancelled'
                 WHEN verdict.done + verdict.failed = verdict.total THEN 'queued'
                 ELSE 'waiting' END)::job_state AS state
    FROM verdict
), inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, meta, state, finished_at,
        last_error, created_at
    )
    SELECT @id::uuid, @queue::text, @type::text,
           nullif(sqlc.arg('payload_json')::text, '')::jsonb, @priority::smallint,
           @max_attempts::integer, @backoff_kind::backoff_kind, @backoff_base::interval,
           @backoff_max::interval,
           coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval),
           coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb), decided.state,
           CASE WHEN decided.state = 'cancelled' THEN now() END,
           CASE WHEN decided.state = 'cancelled'
               THEN 'cancelled: a job it depends on ended dead or cancelled' END,
           now()
    FROM decided
    WHERE decided.unknown = 0
    RETURNING id, queue, state, run_at, created_at
), edges AS (
    INSERT INTO job_dependencies (depends_on, job_id, if_failed)
    SELECT deps.id, inserted.id, @if_failed::text FROM inserted CROSS JOIN deps
), waits AS (
    -- What it still waits for: each completion takes its job out (migration 00019).
    INSERT INTO job_waits (job_id, pending)
    SELECT inserted.id,
           (SELECT array_agg(deps.id) FROM deps
            WHERE deps.state NOT IN ('succeeded', 'dead', 'cancelled'))
    FROM inserted
    WHERE inserted.state = 'waiting'
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL::job_state, inserted.state,
           0, NULL::text
    FROM inserted
), notified AS (
    SELECT pg_notify(@channel::text, inserted.queue) FROM inserted WHERE inserted.state = 'queued'
)
SELECT decided.unknown, inserted.state, inserted.run_at, inserted.created_at,
       (SELECT count(*) FROM notified)::integer AS notified
FROM decided LEFT JOIN inserted ON true;

-- name: JobSettleWaiting :many
-- The maintenance leader's settling of waiting jobs, batch_size at a time in
-- enqueue order after the cursor (created_at, id): each whose dependencies
-- have all ended is queued, or cancelled if one ended dead or cancelled and
-- it said so. The completion does this for the dependents of the jobs it
-- ends; this catches the rest: dependencies the reaper or an operator ended,
-- a dependent enqueued while its last dependency was committing, and the
-- dependents of a job this cancelled. A dependency no longer in jobs
-- (purged by retention) counts as succeeded. Returns the batch's waiting
-- jobs with what became of them (state: waiting when still waiting).
-- plan: jobs only by index jobs_waiting_idx, jobs_pkey
-- plan: job_dependencies only by index job_dependencies_job_idx
WITH batch AS (
    SELECT jobs.id, jobs.created_at
    FROM jobs
    WHERE jobs.state = 'waiting' AND (jobs.created_at, jobs.id) > (@after_created::timestamptz, @after_id::uuid)
    ORDER BY jobs.created_at, jobs.id
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
), verdict AS MATERIALIZED (
    -- Ids through arrays, so each lookup is an index probe whatever the
    -- statistics say (see JobRecordOutcomes).
    SELECT edge.job_id AS id,
           bool_or(dep.state IN ('dead', 'cancelled') AND edge.if_failed = 'cancel') AS doomed
    FROM job_dependencies AS edge
    LEFT JOIN LATERAL (
        SELECT jobs.state FROM jobs WHERE jobs.id = edge.depends_on LIMIT 1
    ) AS dep ON true
    WHERE edge.job_id = ANY ((SELECT array_agg(batch.id) FROM batch)::uuid[])
    GROUP BY edge.job_id
    HAVING bool_and(coalesce(dep.state, 'succeeded') = 'succeeded'
                    OR (dep.state IN ('dead', 'cancelled') AND edge.if_failed = 'run'))
        OR bool_or(dep.state IN ('dead', 'cancelled') AND edge.if_failed = 'cancel')
), settled AS (
    UPDATE jobs
    SET state = (CASE WHEN jobs.id = ANY ((SELECT array_agg(verdict.id) FROM verdict
                                          WHERE verdict.doomed)::uuid[])
                      THEN 'cancelled' ELSE 'queued' END)::job_state,
        finished_at = CASE WHEN jobs.id = ANY ((SELECT array_agg(verdict.id) FROM verdict
                                                WHERE verdict.doomed)::uuid[])
                           THEN now() END,
        last_error = CASE WHEN jobs.id = ANY ((SELECT array_agg(verdict.id) FROM verdict
                                               WHERE verdict.doomed)::uuid[])
            THEN 'cancelled: a job it depends on ended dead or cancelled' ELSE jobs.last_error END,
        updated_at = now()
    WHERE jobs.id = ANY ((SELECT array_agg(verdict.id) FROM verdict)::uuid[])
    RETURNING jobs.id, jobs.queue, jobs.state, jobs.updated_at,
              CASE WHEN jobs.state = 'queued' THEN pg_notify(@channel::text, jobs.queue) END
                  AS woken
), logged AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT settled.id, settled.updated_at,
           CASE WHEN settled.state = 'queued' THEN 'ready' ELSE 'cancelled' END,
           'waiting', settled.state, 0
    FROM settled
)
SELECT batch.id, batch.created_at, coalesce(settled.state, 'waiting'::job_state) AS state
FROM batch LEFT JOIN settled ON settled.id = batch.id
ORDER BY batch.created_at, batch.id;

-- name: JobDependenciesOf :many
-- A job's dependencies with what became of them: type, state, attempts
-- and last error (all NULL: purged), what a failed one does to it, and,
-- when with_results, each one's stored result (NULL without one). The
-- result is what a fan-in reads (ctx.dependencies()); jobs show asks without.
-- plan: jobs only by index jobs_pkey
-- plan: job_dependencies only by index job_dependencies_job_idx
SELECT edge.depends_on, jobs.state, edge.if_failed, jobs.type, jobs.attempts,
       jobs.last_error,
       CASE WHEN @with_results::boolean THEN
           (SELECT job_results.value FROM job_results WHERE job_results.job_id = edge.depends_on)
       END::jsonb AS result
FROM job_dependencies AS edge
LEFT JOIN jobs ON jobs.id = edge.depends_on
WHERE edge.job_id = @job_id
ORDER BY edge.depends_on;

-- name: JobWorkflowSteps :many
-- The jobs linked to job_id through dependencies, either way and at any
-- distance (its workflow: a group, a chain, a graph), with job_id first,
-- at most max_steps of them (ask one more than you show to know whether
-- there are more). Each step with its job's columns (NULL: purged) and how
-- many jobs it waits for. The walk stops at the limit: the outer LIMIT
-- pulls the recursive scan only as far as it needs.
-- plan: jobs only by index jobs_pkey
WITH RECURSIVE linked (id) AS (
    SELECT @job_id::uuid
    UNION
    SELECT near.id
    FROM linked
    CROSS JOIN LATERAL (
        SELECT edge.depends_on AS id FROM job_dependencies AS edge WHERE edge.job_id = linked.id
        UNION ALL
        SELECT edge.job_id FROM job_dependencies AS edge WHERE edge.depends_on = linked.id
    ) AS near
), steps AS (
    SELECT linked.id FROM linked LIMIT @max_steps
)
SELECT steps.id, jobs.type, jobs.queue, jobs.state, jobs.attempts, jobs.created_at,
       jobs.finished_at, jobs.last_error
FROM steps
LEFT JOIN jobs ON jobs.id = steps.id;

-- name: JobWorkflowEdges :many
-- The dependency edges among the given jobs (a workflow's steps): each
-- (depends_on, job_id) pair whose waiting job is one of them.
-- plan: job_dependencies only by index job_dependencies_job_idx
SELECT edge.depends_on, edge.job_id, edge.if_failed
FROM job_dependencies AS edge
WHERE edge.job_id = ANY (@job_ids::uuid[])
ORDER BY edge.job_id, edge.depends_on;
