-- The charts' roll-up (migration 00021): the maintenance leader folds outcome
-- events into job_stats, in steps of 1, 10 and 60 minutes; the dashboard reads them.

-- name: StatsEventHorizon :one
-- The newest event id handed out so far (0 before the first). Read before
-- StatsSnapshot, in a statement of its own: every event at or below it was
-- written by a transaction that has ended or is running when the snapshot
-- is taken, so once that snapshot's running transactions have all ended
-- (StatsSettled), every such event that will ever be visible is.
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('job_events', 'id')::regclass),
                0)::bigint AS last_event_id;

-- name: StatsSnapshot :one
SELECT pg_current_snapshot()::text AS snapshot;

-- name: StatsSettled :one
-- Whether every transaction that was running when ``snapshot`` was taken and
-- may still add an event at or below the horizon has ended. An insert locks
-- job_events (RowExclusiveLock, held until its transaction ends) before it
-- draws an id, so a transaction that drew one at or below the horizon, read
-- before the snapshot, holds that lock now if it is still running; one that
-- holds no lock on job_events has written no event there, and any it writes
-- later gets a higher id. So only those are waited for: a long transaction
-- elsewhere (another database of the cluster, an application's own work)
-- does not hold the charts back. A transaction is matched to its locks by
-- its virtual transaction; pg_locks shows xids in 32 bits, the snapshot in 64.
SELECT NOT EXISTS (
    SELECT 1
    -- nullif: sqlc vet explains with '' (the roll-up always sends a snapshot).
    FROM pg_snapshot_xip(CAST(nullif(sqlc.arg('snapshot')::text, '') AS pg_snapshot)) AS running (xid)
    JOIN pg_catalog.pg_locks AS holder
      ON holder.locktype = 'transactionid'
     AND holder.transactionid::text::bigint = running.xid::text::bigint % 4294967296
    JOIN pg_catalog.pg_locks AS writer
      ON writer.virtualtransaction = holder.virtualtransaction
     AND writer.locktype = 'relation'
     AND writer.database = (SELECT pg_database.oid FROM pg_catalog.pg_database WHERE datname = current_database())
     AND writer.relation = to_regclass('job_events')
    WHERE pg_xact_status(running.xid) = 'in progress'
) AS settled;

-- name: StatsRollUp :one
-- Fold the events after the cursor, up to ``upto`` and at most ``max_events``
-- ids further, into job_stats, and move the cursor past them, in one
-- statement: the cursor's row lock and its expected position make a second
-- leader (during a handover) fold nothing twice; it folds nothing at all and
-- reads the cursor again.
--
-- Counted: each attempt that ended (succeeded, failed and to be retried,
-- reaped, dead) and each cancellation, in the steps its event falls in. An
-- attempt that ended a job also gives its run time (from its claim event to
-- its outcome event) and queue wait (from when it was due, the job's run_at,
-- to its claim) when the claim was recorded (event_mode all) and the job is
-- still kept; events of purged jobs count nothing.
-- The events are a range of job_events_pkey; each one's job, and the claim of
-- each ended attempt, are probes of jobs_pkey and job_events_job_idx.
-- plan: jobs only by index jobs_pkey; job_events only by index job_events_pkey, job_events_job_idx
WITH cursor AS (
    SELECT job_stats_cursor.last_event_id
    FROM job_stats_cursor
    WHERE job_stats_cursor.singleton AND job_stats_cursor.last_event_id = @after::bigint
    FOR UPDATE
), bound AS (
    SELECT cursor.last_event_id AS after,
           greatest(cursor.last_event_id,
                    least(@upto::bigint, cursor.last_event_id + @max_events::bigint)) AS upto
    FROM cursor
), ended AS (
    -- Each duration's histogram bucket, in float8 (ln() of the numeric that
    -- extract() returns was most of a fold's time), only where the duration
    -- exists: greatest() would pass over a null and give it bucket 0.
    SELECT e.at, jobs.queue, jobs.type, e.kind, e.to_state,
           CASE WHEN claim.at IS NOT NULL
                THEN least(47, floor(2 * ln(greatest(1.0, 1000 * extract(epoch FROM e.at - claim.at)::float8))
                                     / ln(2.0::float8)))::integer END AS run_bucket,
           CASE WHEN e.to_state IN ('succeeded', 'dead') AND jobs.attempts = e.attempt
                     AND jobs.run_at <= claim.at
                THEN least(47, floor(2 * ln(greatest(1.0, 1000 * extract(epoch FROM claim.at - jobs.run_at)::float8))
                                     / ln(2.0::float8)))::integer END AS wait_bucket
    FROM bound
    JOIN job_events AS e ON e.id > bound.after AND e.id <= bound.upto
    JOIN jobs ON jobs.id = e.job_id
    LEFT JOIN LATERAL (
        SELECT claimed.at
        FROM job_events AS claimed
        WHERE claimed.job_id = e.job_id AND claimed.id < e.id
          AND claimed.kind = 'claimed' AND claimed.attempt = e.attempt
        ORDER BY claimed.id DESC
        LIMIT 1
    ) AS claim ON e.kind IN ('succeeded', 'failed', 'dead') AND e.from_state = 'leased'
    WHERE e.to_state IN ('succeeded', 'dead', 'cancelled') OR e.kind IN ('failed', 'reaped')
), bucketed AS (
    -- Each outcome once per width: in the step of 1, 10 and 60 minutes it falls in.
    SELECT steps.width,
           date_bin(make_interval(mins => steps.width), ended.at, timestamptz '2000-01-01')
               AS at,
           ended.queue, ended.type, ended.kind, ended.to_state, ended.run_bucket, ended.wait_bucket
    FROM ended
    CROSS JOIN unnest(ARRAY[1, 10, 60]::smallint[]) AS steps (width)
), grouped AS (
    SELECT bucketed.width, bucketed.at, bucketed.queue, bucketed.type,
           count(*) FILTER (WHERE bucketed.to_state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE bucketed.to_state NOT IN ('succeeded', 'dead', 'cancelled'))
               AS failed,
           count(*) FILTER (WHERE bucketed.to_state = 'dead') AS dead,
           count(*) FILTER (WHERE bucketed.to_state = 'cancelled') AS cancelled,
           array_agg(bucketed.wait_bucket) FILTER (WHERE bucketed.wait_bucket IS NOT NULL)
               AS wait_buckets,
           array_agg(bucketed.run_bucket) FILTER (WHERE bucketed.run_bucket IS NOT NULL
                                                  AND bucketed.to_state IN ('succeeded', 'dead'))
               AS run_buckets
    FROM bucketed
    GROUP BY bucketed.width, bucketed.at, bucketed.queue, bucketed.type
), folded AS (
    INSERT INTO job_stats (width, at, queue, type, succeeded, failed, dead, cancelled, wait_ms,
                           run_ms)
    SELECT grouped.width, grouped.at, grouped.queue, grouped.type, grouped.succeeded, grouped.failed,
           grouped.dead, grouped.cancelled,
           ARRAY(SELECT count(w.bucket)
                 FROM generate_series(0, 47) AS slot (i)
                 LEFT JOIN unnest(grouped.wait_buckets) AS w (bucket) ON w.bucket = slot.i
                 GROUP BY slot.i ORDER BY slot.i),
           ARRAY(SELECT count(r.bucket)
                 FROM generate_series(0, 47) AS slot (i)
                 LEFT JOIN unnest(grouped.run_buckets) AS r (bucket) ON r.bucket = slot.i
                 GROUP BY slot.i ORDER BY slot.i)
    FROM grouped
    ON CONFLICT (width, at, queue, type) DO UPDATE
    SET succeeded = job_stats.succeeded + excluded.succeeded,
        failed = job_stats.failed + excluded.failed,
        dead = job_stats.dead + excluded.dead,
        cancelled = job_stats.cancelled + excluded.cancelled,
        wait_ms = ARRAY(SELECT job_stats.wait_ms[slot.i] + excluded.wait_ms[slot.i]
                        FROM generate_series(1, 48) AS slot (i)
                        ORDER BY slot.i),
        run_ms = ARRAY(SELECT job_stats.run_ms[slot.i] + excluded.run_ms[slot.i]
                       FROM generate_series(1, 48) AS slot (i)
                       ORDER BY slot.i)
    RETURNING 1
), moved AS (
    UPDATE job_stats_cursor
    SET last_event_id = bound.upto, rolled_at = now()
    FROM bound
    WHERE job_stats_cursor.singleton
    RETURNING job_stats_cursor.last_event_id
)
SELECT coalesce((SELECT moved.last_event_id FROM moved),
                (SELECT job_stats_cursor.last_event_id FROM job_stats_cursor))::bigint
           AS last_event_id,
       (SELECT count(*) FROM ended)::bigint AS counted,
       (SELECT count(*) FROM moved) > 0 AS moved;

-- name: StatsCursor :one
SELECT last_event_id, rolled_at FROM job_stats_cursor WHERE singleton;

-- name: StatsUnfoldedSince :one
-- When the oldest event the roll-up has not folded yet was written (null when
-- it has folded every event): how far the charts trail. A probe of
-- job_events_pkey after the cursor.
-- plan: job_events only by index job_events_pkey
SELECT (SELECT job_events.at
        FROM job_events
        WHERE job_events.id > (SELECT job_stats_cursor.last_event_id
                               FROM job_stats_cursor
                               WHERE job_stats_cursor.singleton)
        ORDER BY job_events.id
        LIMIT 1)::timestamptz AS unfolded_since;

-- name: StatsSeries :many
-- Per step of ``width`` minutes since ``since``: attempts ended by outcome,
-- with the wait and run histograms summed, for one queue and type or all.
-- The rows of one width are at most 168 per queue and type for every window
-- the charts show (60 minutes, 144 ten-minute steps, 168 hours).
-- plan: job_stats only by index job_stats_pkey
WITH chosen AS (
    SELECT job_stats.*
    FROM job_stats
    WHERE job_stats.width = @width::smallint AND job_stats.at >= @since::timestamptz
      AND (sqlc.narg('queue')::text IS NULL OR job_stats.queue = sqlc.narg('queue'))
      AND (sqlc.narg('type')::text IS NULL OR job_stats.type = sqlc.narg('type'))
), counts AS (
    SELECT chosen.at, sum(chosen.succeeded)::bigint AS succeeded,
           sum(chosen.failed)::bigint AS failed, sum(chosen.dead)::bigint AS dead,
           sum(chosen.cancelled)::bigint AS cancelled
    FROM chosen
    GROUP BY chosen.at
), histograms AS (
    SELECT chosen.at, slot.i, sum(chosen.wait_ms[slot.i])::bigint AS wait,
           sum(chosen.run_ms[slot.i])::bigint AS run
    FROM chosen, generate_series(1, 48) AS slot (i)
    GROUP BY chosen.at, slot.i
), arrays AS (
    SELECT histograms.at, array_agg(histograms.wait ORDER BY histograms.i) AS wait_ms,
           array_agg(histograms.run ORDER BY histograms.i) AS run_ms
    FROM histograms
    GROUP BY histograms.at
)
SELECT counts.at::timestamptz AS at, counts.succeeded, counts.failed, counts.dead,
       counts.cancelled, arrays.wait_ms::bigint[] AS wait_ms, arrays.run_ms::bigint[] AS run_ms
FROM counts
JOIN arrays ON arrays.at = counts.at
ORDER BY counts.at;

-- name: StatsBreakdown :many
-- Per queue and type, over the steps of ``width`` minutes since ``since``:
-- attempts ended by outcome and the wait and run histograms summed.
-- plan: job_stats only by index job_stats_pkey
WITH chosen AS (
    SELECT job_stats.*
    FROM job_stats
    WHERE job_stats.width = @width::smallint AND job_stats.at >= @since::timestamptz
      AND (sqlc.narg('queue')::text IS NULL OR job_stats.queue = sqlc.narg('queue'))
), counts AS (
    SELECT chosen.queue, chosen.type, sum(chosen.succeeded)::bigint AS succeeded,
           sum(chosen.failed)::bigint AS failed, sum(chosen.dead)::bigint AS dead,
           sum(chosen.cancelled)::bigint AS cancelled
    FROM chosen
    GROUP BY chosen.queue, chosen.type
), histograms AS (
    SELECT chosen.queue, chosen.type, slot.i, sum(chosen.wait_ms[slot.i])::bigint AS wait,
           sum(chosen.run_ms[slot.i])::bigint AS run
    FROM chosen, generate_series(1, 48) AS slot (i)
    GROUP BY chosen.queue, chosen.type, slot.i
), arrays AS (
    SELECT histograms.queue, histograms.type,
           array_agg(histograms.wait ORDER BY histograms.i) AS wait_ms,
           array_agg(histograms.run ORDER BY histograms.i) AS run_ms
    FROM histograms
    GROUP BY histograms.queue, histograms.type
)
SELECT counts.queue, counts.type, counts.succeeded, counts.failed, counts.dead, counts.cancelled,
       arrays.wait_ms::bigint[] AS wait_ms, arrays.run_ms::bigint[] AS run_ms
FROM counts
JOIN arrays ON arrays.queue = counts.queue AND arrays.type = counts.type
ORDER BY counts.queue, counts.type;

-- name: StatsOutcomesPerQueue :many
-- Attempts ended by outcome per queue and minute since ``since``, every type
-- together: the overview's lines and last hour's counts.
-- plan: job_stats only by index job_stats_pkey
SELECT job_stats.queue, job_stats.at AS minute,
       sum(job_stats.succeeded)::bigint AS succeeded, sum(job_stats.failed)::bigint AS failed,
       sum(job_stats.dead)::bigint AS dead, sum(job_stats.cancelled)::bigint AS cancelled
FROM job_stats
WHERE job_stats.width = 1 AND job_stats.at >= @since::timestamptz
GROUP BY job_stats.queue, job_stats.at
ORDER BY job_stats.queue, job_stats.at;

-- name: StatsPrune :execrows
-- Delete up to ``batch_size`` rows of one width older than ``age``, oldest first.
-- plan: job_stats only by index job_stats_pkey
DELETE FROM job_stats
WHERE (width, at, queue, type) IN (
    SELECT old.width, old.at, old.queue, old.type
    FROM job_stats AS old
    WHERE old.width = @width::smallint AND old.at < now() - @age::interval
    ORDER BY old.at
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
);

-- name: StatsParkedPerQueue :many
-- Per queue, the jobs that are neither in the backlog, running nor
-- succeeded: waiting (for dependencies or a key's slot), dead and cancelled,
-- for the overview: an index-only scan of jobs_parked_queue_idx (migration
-- 00022), whose work follows those jobs, never the succeeded history that is
-- most of a busy table.
-- plan: jobs only by index jobs_parked_queue_idx
SELECT jobs.queue, jobs.state, count(*)::bigint AS count
FROM jobs
-- The index's own predicate, queue IS NOT NULL included (see migration 00022).
WHERE jobs.state IN ('waiting', 'dead', 'cancelled') AND jobs.queue IS NOT NULL
GROUP BY jobs.queue, jobs.state
ORDER BY jobs.queue, jobs.state;
