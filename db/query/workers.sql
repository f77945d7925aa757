-- The worker processes that are alive (migration 00017).

-- name: WorkerSeen :exec
-- A worker's row, written when it starts and every heartbeat interval: the
-- whole row each time, so one deleted while the worker was unreachable
-- comes back. running is the worker's own list of the jobs it runs (id,
-- type, queue, started_at), at most a hundred of them.
INSERT INTO workers (owner, host, pid, version, queues, concurrency, beat, running,
                     started_at, last_seen_at)
VALUES (@owner::text, @host::text, @pid::integer, @version::text, @queues::text[],
        @concurrency::integer, @beat::interval, @running::jsonb, @started_at::timestamptz,
        now())
ON CONFLICT (owner) DO UPDATE
SET running = excluded.running,
    last_seen_at = excluded.last_seen_at;

-- name: WorkerGone :exec
-- A worker that stopped deletes its row.
DELETE FROM workers WHERE owner = @owner::text;

-- name: WorkerList :many
-- Every worker row, with whether it is alive (written within three of its
-- intervals) and the count of jobs leased under its name.
-- plan: jobs only by index jobs_leased_idx
SELECT workers.owner, workers.host, workers.pid, workers.version, workers.queues,
       workers.concurrency, workers.beat, workers.running, workers.started_at,
       workers.last_seen_at,
       (workers.last_seen_at > now() - 3 * workers.beat)::boolean AS alive,
       (SELECT count(*) FROM jobs
        WHERE jobs.state = 'leased' AND jobs.lease_owner = workers.owner)::integer AS leased,
       now()::timestamptz AS now
FROM workers
ORDER BY workers.host, workers.started_at, workers.owner;

-- name: WorkerPrune :execrows
-- Delete the rows of workers not heard from for older_than.
DELETE FROM workers
WHERE last_seen_at < now() - @older_than::interval;
