-- The plan report's scale database (scripts/plans, jobrun_tools.plans): jobrun's
-- tables filled with a realistic mix of jobs, set-based (generate_series, one
-- statement per table), never row by row. Generated into jobrun_tools/sqlc,
-- which the wheel does not ship.
--
-- Everything is a function of the row number and of `now`, the database clock
-- read once when the build starts: two builds of the same size hold the same
-- rows, in the same physical order, at the same distances from their `now`,
-- so their statistics, and with them their plans, are the same. The
-- pseudo-random draws are multiplicative hashes of the row number (the top
-- bits of g * an odd constant mod 2^32, scaled to [0, 1000)), not random().
--
-- The fills of jobs, job_events, processed_effects and schedules use only
-- the columns of migration 00001: they run on a database at that version, and
-- the later migrations are then applied to the filled tables (the migration
-- review measures them there).

-- name: ScaleFillJobs :execrows
-- jobs rows, ids and created_at ascending with g. The oldest 2% are history
-- kept by retention (dead for two weeks, cancelled for one), the newest 2%
-- are live (leased, a due backlog, succeeded); the day between is mostly
-- succeeded with some dead, cancelled and retries waiting. One job in twenty
-- is a digest queued for later (hours to a week ahead) in its own queue: a
-- queue an idle claim finds full of delayed jobs. A quarter carry an
-- idempotency key; payloads are small (80%), about 600 bytes (17%) or 6 kB.
INSERT INTO jobs (
    id, queue, type, payload, priority, state, attempts, max_attempts, run_at,
    lease_owner, lease_expires_at, idempotency_key, last_error, created_at, updated_at,
    finished_at
)
SELECT ('01900000-0000-7000-8000-' || lpad(to_hex(d.g), 12, '0'))::uuid,
       c.queue,
       CASE c.queue
           WHEN 'digests' THEN 'send_digest'
           WHEN 'emails' THEN 'send_email'
           WHEN 'webhooks' THEN 'deliver_webhook'
           WHEN 'reports' THEN 'render_report'
           WHEN 'billing' THEN 'charge_invoice'
           WHEN 'media' THEN 'transcode'
           ELSE CASE WHEN d.s < 500 THEN 'sync_account' ELSE 'refresh_cache' END
       END,
       CASE WHEN d.s < 800 THEN jsonb_build_object('n', d.g, 'to', 'user-' || d.g || '@example.com')
            WHEN d.s < 970 THEN jsonb_build_object('n', d.g, 'lines', repeat('line item; ', 50))
            ELSE jsonb_build_object('n', d.g, 'document', repeat(md5(d.g::text), 200)) END,
       CASE WHEN c.queue = 'digests' THEN (d.g / 20) % 4
            WHEN d.s % 20 = 0 THEN -10
            WHEN d.s % 20 < 4 THEN 10
            ELSE 0 END::smallint,
       c.state::job_state,
       CASE c.kind
           WHEN 'succeeded' THEN CASE WHEN d.r % 50 = 0 THEN 2 ELSE 1 END
           WHEN 'dead' THEN CASE WHEN d.r % 2 = 0 THEN 5 ELSE 25 END
           WHEN 'cancelled' THEN d.r % 2
           WHEN 'retry' THEN 1 + d.r % 3
           WHEN 'leased' THEN 1
           ELSE 0 END,
       CASE WHEN c.kind = 'dead' AND d.r % 2 = 0 THEN 5 ELSE 25 END,
       CASE c.kind
           WHEN 'later' THEN sqlc.arg('now')::timestamptz + interval '1 hour'
                             + interval '1 second' * mod(d.g * 7919, 604800)
           WHEN 'retry' THEN sqlc.arg('now')::timestamptz
                             + interval '1 second' * (1 + mod(d.g * 7919, 21600))
           ELSE d.created_at END,
       CASE WHEN c.kind = 'leased' THEN 'worker-' || (d.g % 8) || ':4242' END,
       CASE WHEN c.kind <> 'leased' THEN NULL
            WHEN d.r % 10 = 0 THEN sqlc.arg('now')::timestamptz - interval '10 seconds'
            ELSE sqlc.arg('now')::timestamptz + interval '30 seconds' END,
       CASE WHEN d.q % 4 = 0 THEN 'order-' || d.g END,
       CASE WHEN c.kind IN ('dead', 'retry') THEN 'ConnectionError: upstream refused' END,
       d.created_at,
       coalesce(f.finished_at, d.created_at),
       f.finished_at
FROM generate_series(1, sqlc.arg('jobs')::bigint) AS g
CROSS JOIN LATERAL (
    SELECT g,
           (mod(g * 2654435761, 4294967296) * 1000) / 4294967296 AS r,
           (mod(g * 2246822519, 4294967296) * 1000) / 4294967296 AS q,
           (mod(g * 3266489917, 4294967296) * 1000) / 4294967296 AS s,
           CASE WHEN g <= sqlc.arg('jobs')::bigint / 50 THEN 'old'
                WHEN g > sqlc.arg('jobs')::bigint - sqlc.arg('jobs')::bigint / 50 THEN 'live'
                ELSE 'day' END AS segment,
           CASE WHEN g <= sqlc.arg('jobs')::bigint / 50
                THEN sqlc.arg('now')::timestamptz - interval '14 days'
                     + interval '13 days' * (g::float8 / (sqlc.arg('jobs')::bigint / 50))
                ELSE sqlc.arg('now')::timestamptz - interval '1 day 2 minutes'
                     + interval '1 day 2 minutes'
                       * ((g - sqlc.arg('jobs')::bigint / 50)::float8
                          / (sqlc.arg('jobs')::bigint - sqlc.arg('jobs')::bigint / 50))
           END AS created_at
) AS d
CROSS JOIN LATERAL (
    SELECT CASE WHEN d.g % 20 = 0 THEN 'digests'
                WHEN d.q < 500 THEN 'default'
                WHEN d.q < 700 THEN 'emails'
                WHEN d.q < 820 THEN 'webhooks'
                WHEN d.q < 900 THEN 'reports'
                WHEN d.q < 950 THEN 'billing'
                ELSE 'media' END AS queue,
           CASE WHEN d.g % 20 = 0 THEN 'later'
                WHEN d.segment = 'old' THEN
                    CASE WHEN d.r < 333 AND d.created_at > sqlc.arg('now')::timestamptz - interval '7 days'
                         THEN 'cancelled' ELSE 'dead' END
                WHEN d.segment = 'live' THEN
                    CASE WHEN d.r < 26 THEN 'leased' WHEN d.r < 526 THEN 'due' ELSE 'succeeded' END
                WHEN d.r < 5 THEN 'dead'
                WHEN d.r < 8 THEN 'cancelled'
                WHEN d.r < 33 THEN 'retry'
                ELSE 'succeeded' END AS kind
) AS k
CROSS JOIN LATERAL (
    SELECT k.queue,
           k.kind,
           CASE WHEN k.kind IN ('later', 'retry', 'due') THEN 'queued' ELSE k.kind END AS state
) AS c
CROSS JOIN LATERAL (
    SELECT CASE c.kind
               WHEN 'succeeded' THEN least(
                   d.created_at + interval '1 millisecond' * (20 + mod(d.g * 31, 5000)),
                   sqlc.arg('now')::timestamptz)
               WHEN 'dead' THEN least(d.created_at + interval '2 hours', sqlc.arg('now')::timestamptz)
               WHEN 'cancelled' THEN least(d.created_at + interval '1 minute',
                                           sqlc.arg('now')::timestamptz)
           END AS finished_at
) AS f;

-- name: ScaleFillEvents :execrows
-- The events every job has in event mode `all`, in the order the store writes
-- them: enqueued; claimed, for a job that ever ran; then the event of the
-- state it ended in (a failed attempt for a retry waiting). Read from jobs in
-- its physical order, so event ids follow the jobs' ids.
INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner, detail)
SELECT jobs.id, e.at, e.kind, e.from_state::job_state, e.to_state::job_state, e.attempt,
       e.owner, e.detail
FROM jobs
CROSS JOIN LATERAL (
    VALUES
        (1, jobs.created_at, 'enqueued', NULL, 'queued', 0, NULL, NULL),
        (2, jobs.created_at + interval '5 milliseconds', 'claimed', 'queued', 'leased',
         greatest(jobs.attempts, 1), 'worker-' || mod(get_byte(uuid_send(jobs.id), 15), 8) || ':4242',
         NULL),
        (3, jobs.updated_at,
         CASE WHEN jobs.state = 'queued' THEN 'failed' ELSE jobs.state::text END,
         CASE WHEN jobs.state = 'cancelled' AND jobs.attempts = 0 THEN 'queued' ELSE 'leased' END,
         jobs.state::text, jobs.attempts, NULL, jobs.last_error)
) AS e (seq, at, kind, from_state, to_state, attempt, owner, detail)
WHERE e.seq = 1
   OR (e.seq = 2 AND (jobs.attempts > 0 OR jobs.state = 'leased'))
   OR (e.seq = 3 AND (jobs.finished_at IS NOT NULL
                      OR (jobs.state = 'queued' AND jobs.attempts > 0)));

-- name: ScaleFillEffects :execrows
-- The effect ledger as migration 00001 kept it (a keyed job's key is its
-- idempotency key, migration 00002 rewrites it): first rows of jobs purged
-- long ago, one for every five jobs, spread over the 91 days before the last
-- one (rows past the 90 days retention keeps are due for pruning; a quarter
-- are keyed, in the form 00002 writes, their jobs gone); then one row per
-- succeeded job of the types that commit an effect (emails, webhooks,
-- invoices), as its completion wrote it.
INSERT INTO processed_effects (scope, key, job_id, created_at)
SELECT 'job:send_email',
       CASE WHEN g % 4 = 0 THEN quote_literal('emails') || ':order-old-' || g
            ELSE ('01800000-0000-7000-8000-' || lpad(to_hex(g), 12, '0')) END,
       ('01800000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       sqlc.arg('now')::timestamptz - interval '92 days'
           + interval '91 days' * (g::float8 / (sqlc.arg('jobs')::bigint / 5))
FROM generate_series(1, sqlc.arg('jobs')::bigint / 5) AS g
UNION ALL
SELECT 'job:' || jobs.type, coalesce(jobs.idempotency_key, jobs.id::text), jobs.id,
       jobs.finished_at
FROM jobs
WHERE jobs.state = 'succeeded'
  AND jobs.type IN ('send_email', 'deliver_webhook', 'charge_invoice');

-- name: ScaleFillSchedules :execrows
-- One schedule per 5,000 jobs (at least ten): two in three on a cron
-- expression, one in three on an interval, one in ten paused, one in fifty
-- due now (the scheduler's next pass fires it).
INSERT INTO schedules (
    name, type, queue, payload, priority, max_attempts, cron, every, timezone,
    next_run_at, last_run_at, paused, created_at, updated_at
)
SELECT 'schedule-' || lpad(n::text, 5, '0'), 'send_digest', 'digests',
       jsonb_build_object('n', n), 0, 25,
       CASE WHEN n % 3 <> 0 THEN '*/5 * * * *' END,
       CASE WHEN n % 3 = 0 THEN interval '1 hour' END,
       'UTC',
       CASE WHEN n % 50 = 0 THEN sqlc.arg('now')::timestamptz - interval '30 seconds'
            ELSE sqlc.arg('now')::timestamptz + interval '1 second' * mod(n * 7919, 3600) END,
       sqlc.arg('now')::timestamptz - interval '1 hour',
       n % 10 = 0,
       sqlc.arg('now')::timestamptz - interval '30 days',
       sqlc.arg('now')::timestamptz - interval '1 hour'
FROM generate_series(1, greatest(sqlc.arg('jobs')::bigint / 5000, 10)) AS n;

-- name: ScaleFillQueues :execrows
-- The queue controls of migration 00004, as operators set them: reports
-- limited to 4 at once, webhooks to 50 a second, billing to both, media
-- paused; the other queues have no row.
INSERT INTO queues (name, paused, concurrency_limit, rate_limit, rate_interval, changed_by)
VALUES ('reports', false, 4, NULL, NULL, 'ops'),
       ('webhooks', false, NULL, 50, interval '1 second', 'ops'),
       ('billing', false, 2, 10, interval '1 minute', 'ops'),
       ('media', true, NULL, NULL, NULL, 'ops');

-- name: ScaleFillOffers :execrows
-- The handoff offers (migration 00009) of eight idle workers, each for the
-- default and emails queues.
INSERT INTO worker_offers (owner, queue, channel, slots, lease, expires_at)
SELECT 'worker-' || w || ':4242', queue, 'jobrun_w' || w, w % 5, interval '30 seconds',
       sqlc.arg('now')::timestamptz + interval '10 seconds'
FROM generate_series(0, 7) AS w
CROSS JOIN unnest(ARRAY['default', 'emails']) AS queue;

-- name: ScaleFillResults :execrows
-- Results (migration 00015): one for every third succeeded job, as its
-- completion stored it, a small JSON object.
INSERT INTO job_results (job_id, value, stored_at)
SELECT jobs.id, jsonb_build_object('rows', mod(hashtext(jobs.id::text), 1000), 'ok', true),
       jobs.finished_at
FROM jobs
WHERE jobs.state = 'succeeded'
  AND mod(hashtext(jobs.id::text), 3) = 0;

-- name: ScaleFillUnique :execrows
-- Uniqueness keys (migration 00016) on one in twenty of the queued and
-- running jobs, held while queued or running (bits 1 and 2).
UPDATE jobs
SET unique_key = md5(id::text) || md5(type), unique_states = 3
WHERE state IN ('queued', 'leased')
  AND mod(hashtext(id::text), 20) = 0;

-- name: ScaleFillWorkers :execrows
-- The rows of eight live workers (migration 00017), each running nothing it
-- lists.
INSERT INTO workers (owner, host, pid, version, queues, concurrency, beat, started_at,
                     last_seen_at)
SELECT 'worker-' || w || ':4242:ab12', 'worker-' || w, 4242, '0.1.0',
       ARRAY['default', 'emails'], 100, interval '10 seconds', sqlc.arg('now')::timestamptz,
       sqlc.arg('now')::timestamptz
FROM generate_series(0, 7) AS w;

-- name: ScaleFillDependencies :execrows
-- Dependencies (migration 00018): 20,000 waiting jobs, each depending on two
-- of the first 40,000 queued jobs of the default queue (in id order), so a
-- completion of those releases them.
WITH dependents AS (
    INSERT INTO jobs (id, queue, type, payload, state, attempts, max_attempts, run_at,
                      created_at, updated_at)
    SELECT ('01a00000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'default',
           'build_report', '{}'::jsonb, 'waiting', 0, 25, sqlc.arg('now')::timestamptz,
           sqlc.arg('now')::timestamptz, sqlc.arg('now')::timestamptz
    FROM generate_series(1, 20000) AS g
    RETURNING id
), numbered AS (
    SELECT dependents.id, row_number() OVER (ORDER BY dependents.id) AS n FROM dependents
), deps AS (
    SELECT first.id, row_number() OVER (ORDER BY first.id) AS n
    FROM (SELECT jobs.id FROM jobs WHERE jobs.state = 'queued' AND jobs.queue = 'default'
          ORDER BY jobs.id LIMIT 40000) AS first
)
INSERT INTO job_dependencies (depends_on, job_id, if_failed)
SELECT deps.id, numbered.id, 'cancel' FROM numbered JOIN deps ON deps.n = 2 * numbered.n - 1
UNION ALL
SELECT deps.id, numbered.id, 'run' FROM numbered JOIN deps ON deps.n = 2 * numbered.n;

-- name: ScaleFillWaits :execrows
-- What each of ScaleFillDependencies' waiting jobs still waits for (migration
-- 00019): both of its dependencies, which are queued.
INSERT INTO job_waits (job_id, pending)
SELECT edge.job_id, array_agg(edge.depends_on ORDER BY edge.depends_on)
FROM job_dependencies AS edge
GROUP BY edge.job_id;

-- name: ScaleFillConcurrency :execrows
-- Concurrency keys (migration 00020): 100,000 keys with one waiting job
-- each (limit 2), and two admitted slots for each of the first 10,000 keys
-- held by queued jobs of the default queue (after the 40,000 the
-- dependencies use), so a claim sees 100,000 keys' jobs waiting. Their ids
-- are older than every other job's, so the newest-first listings, which
-- step over rows their filter drops, meet them last, as they would meet
-- old waiting jobs.
WITH waiting AS (
    INSERT INTO jobs (id, queue, type, payload, state, attempts, max_attempts, run_at,
                      created_at, updated_at)
    SELECT ('01800000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'default',
           'sync_customer', '{}'::jsonb, 'waiting', 0, 25, sqlc.arg('now')::timestamptz,
           sqlc.arg('now')::timestamptz, sqlc.arg('now')::timestamptz
    FROM generate_series(1, 100000) AS g
    RETURNING id
), numbered AS (
    SELECT waiting.id, row_number() OVER (ORDER BY waiting.id) AS n FROM waiting
), holders AS (
    SELECT held.id, row_number() OVER (ORDER BY held.id) AS n
    FROM (SELECT jobs.id FROM jobs WHERE jobs.state = 'queued' AND jobs.queue = 'default'
          ORDER BY jobs.id OFFSET 40000 LIMIT 20000) AS held
)
INSERT INTO job_concurrency (job_id, key, key_limit, status)
SELECT numbered.id, 'customer:' || numbered.n, 2, 'waiting' FROM numbered
UNION ALL
SELECT holders.id, 'customer:' || ((holders.n - 1) / 2 + 1), 2, 'admitted' FROM holders;

-- name: ScaleFillStats :execrows
-- The charts' rows (migration 00021) as the maintenance leader's roll-up
-- leaves them, for each queue and type the jobs have: a day of minutes, two
-- days of ten-minute steps and eight days of hours (what retention keeps);
-- and its cursor 100,000 events short of the newest, so the roll-up's case
-- folds a batch of real events.
WITH pairs AS (
    SELECT DISTINCT jobs.queue, jobs.type FROM jobs
), moved AS (
    UPDATE job_stats_cursor
    SET last_event_id = greatest(0, (SELECT max(job_events.id) FROM job_events) - 100000)
    WHERE job_stats_cursor.singleton
)
INSERT INTO job_stats (width, at, queue, type, succeeded, failed, dead, cancelled, wait_ms,
                       run_ms)
SELECT widths.width,
       date_bin(make_interval(mins => widths.width), sqlc.arg('now')::timestamptz,
                timestamptz '2000-01-01') - make_interval(mins => widths.width * steps.g),
       pairs.queue, pairs.type, (50 + mod(steps.g, 17)) * widths.width,
       mod(steps.g, 3) * widths.width, mod(steps.g, 29) / 28, 0,
       array_fill(2::bigint, ARRAY[48]), array_fill(1::bigint, ARRAY[48])
FROM pairs
CROSS JOIN (VALUES (1::smallint, 1440), (10::smallint, 288), (60::smallint, 192))
    AS widths (width, steps)
CROSS JOIN LATERAL generate_series(0, widths.steps - 1) AS steps (g);

-- name: ScaleFacts :one
-- Rows of the scale database the report's cases take their parameters from:
-- the first job of each kind, in id order, so every build answers alike.
SELECT (SELECT id FROM jobs WHERE state = 'dead' ORDER BY id LIMIT 1)::uuid AS dead_id,
       (SELECT id FROM jobs WHERE state = 'cancelled' ORDER BY id LIMIT 1)::uuid AS cancelled_id,
       (SELECT id FROM jobs WHERE state = 'queued' AND queue = 'default' AND run_at <= sqlc.arg('now')::timestamptz
        ORDER BY id LIMIT 1)::uuid AS queued_id,
       (SELECT id FROM jobs WHERE state = 'succeeded' ORDER BY id DESC LIMIT 1)::uuid AS succeeded_id,
       (SELECT id FROM jobs WHERE state = 'leased' ORDER BY id LIMIT 1)::uuid AS leased_id,
       (SELECT id FROM jobs ORDER BY id DESC LIMIT 1 OFFSET 50)::uuid AS page_cursor,
       (SELECT id FROM jobs WHERE idempotency_key IS NOT NULL AND queue = 'emails'
        ORDER BY id DESC LIMIT 1)::uuid AS keyed_id,
       (SELECT idempotency_key FROM jobs WHERE idempotency_key IS NOT NULL AND queue = 'emails'
        ORDER BY id DESC LIMIT 1)::text AS keyed_key,
       (SELECT id FROM jobs WHERE state = 'dead' ORDER BY id DESC LIMIT 1 OFFSET 50)::uuid
           AS dead_cursor,
       ARRAY(SELECT id FROM jobs WHERE state = 'succeeded' ORDER BY id DESC LIMIT 10)::uuid[]
           AS recent_succeeded,
       (SELECT count(*) FROM jobs)::bigint AS jobs,
       (SELECT last_event_id FROM job_stats_cursor)::bigint AS stats_cursor;

-- name: ScaleSetting :one
-- Set a planner setting for this session (set_config, is_local false).
SELECT set_config(sqlc.arg('name')::text, sqlc.arg('value')::text, false)::text AS value;

-- name: ScaleServerVersion :one
SELECT current_setting('server_version_num')::integer AS version_num;

-- name: ScaleVacuum :exec
-- Vacuum every table of the database: after the fill, as a live database
-- would be before a migration; a vacuum that reads every page also counts
-- every table's rows exactly (pg_class.reltuples), which the migration
-- review reports.
-- @sqlc-vet-disable
VACUUM;

-- name: ScaleVacuumAnalyze :exec
-- Vacuum (the visibility map: index-only scans are costed by it) and analyze
-- every table of the database, with this session's statistics target.
-- @sqlc-vet-disable
VACUUM (ANALYZE);

-- name: ScaleTablesAutovacuumOff :exec
-- The report's database is analyzed once, by the build, with its own
-- statistics target: autovacuum must not analyze a table again with the
-- server's target (a random sample), nor vacuum one mid-report. Only the
-- storage parameter changes; no plan reads it.
-- @sqlc-vet-disable
DO $$
DECLARE
    name text;
BEGIN
    FOR name IN
        SELECT c.relname FROM pg_catalog.pg_class AS c
        WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
        ORDER BY c.relname
    LOOP
        -- quote_ident, not format(): the generated constant of a query
        -- without parameters is sent as written, its percent signs doubled.
        EXECUTE 'ALTER TABLE ' || quote_ident(name) || ' SET (autovacuum_enabled = false)';
    END LOOP;
END
$$;
