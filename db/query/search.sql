-- Searching the jobs listing: by id prefix or suffix, error text and payload
-- containment, together with the listing's filters, newest first.
--
-- No index answers an id suffix, a substring of last_error or a payload
-- containment (a GIN or trigram index would be written on every enqueue and
-- claim, the hot path), so a search walks jobs in id order, newest first, and
-- examines at most max_walk of them in one call: the walk is a LIMIT over a
-- range scan of an index, never a scan of the table. Ids are UUIDv7, ordered
-- by creation, so the walk reads the newest jobs first.
--
-- Each call returns the matching jobs it met, in id order, at most max_jobs of
-- them, and also the walk's last row (walked = max_walk) whether it matches or
-- not: that row says the walk stopped at its bound, and its id is where the
-- next call continues (high = just below it). A call that returns max_jobs
-- matching rows stopped early, before its bound. Every filter is applied to
-- the walked rows (matched), so a filter no index serves costs no extra rows.
--
-- The range [low, high] is the id prefix's (all of uuid space without one),
-- already cut below the caller's cursor: one index range for both. The store
-- computes it (jobrun.domain.id_range). The error is matched with strpos,
-- not ILIKE, so that %, _ and \ in what an operator types are only text.

-- name: JobSearch :many
-- Walk the primary key, newest first, within [low, high].
-- plan: jobs only by index jobs_pkey; no sort
-- plan(error, payload, suffix-next, queued-error): rows removed <= 50000
SELECT walked.*
FROM (
    SELECT jobs.*,
           row_number() OVER (ORDER BY jobs.id DESC) AS walked,
           coalesce(((sqlc.narg('queue')::text IS NULL OR jobs.queue = sqlc.narg('queue'))
            AND (sqlc.narg('state')::job_state IS NULL OR jobs.state = sqlc.narg('state'))
            AND (sqlc.narg('type')::text IS NULL OR jobs.type = sqlc.narg('type'))
            AND (sqlc.narg('created_after')::timestamptz IS NULL
                 OR jobs.created_at >= sqlc.narg('created_after'))
            AND (sqlc.narg('created_before')::timestamptz IS NULL
                 OR jobs.created_at < sqlc.narg('created_before'))
            AND (sqlc.narg('id_suffix')::text IS NULL
                 OR right(replace(jobs.id::text, '-', ''), length(sqlc.narg('id_suffix')))
                    = sqlc.narg('id_suffix'))
            AND (sqlc.narg('error')::text IS NULL
                 OR strpos(lower(jobs.last_error), lower(sqlc.narg('error'))) > 0)
            -- nullif: sqlc vet explains with '' (the store never sends it: not JSON).
            AND (sqlc.narg('payload_json')::text IS NULL
                 OR jobs.payload @> nullif(sqlc.narg('payload_json')::text, '')::jsonb)
           ), false)::boolean AS matched
    FROM jobs
    WHERE jobs.id >= @low::uuid AND jobs.id <= @high::uuid
    ORDER BY jobs.id DESC
    LIMIT @max_walk::integer
) AS walked
WHERE walked.matched OR walked.walked = @max_walk::integer
ORDER BY walked.id DESC
LIMIT @max_jobs::integer;

-- name: JobSearchInState :many
-- JobSearch for a dead or cancelled job: the walk reads the partial index of
-- those states (jobs_dead_cancelled_idx, on state and id), so the bound counts
-- only jobs of the state asked for. The other states have no index in id
-- order: their searches walk the primary key (JobSearch) and filter on state.
-- plan: jobs only by index jobs_dead_cancelled_idx; no sort
-- plan(dead-error, cancelled-payload, dead-suffix-next): rows removed <= 50000
SELECT walked.*
FROM (
    SELECT jobs.*,
           row_number() OVER (ORDER BY jobs.id DESC) AS walked,
           coalesce(((sqlc.narg('queue')::text IS NULL OR jobs.queue = sqlc.narg('queue'))
            AND (sqlc.narg('type')::text IS NULL OR jobs.type = sqlc.narg('type'))
            AND (sqlc.narg('created_after')::timestamptz IS NULL
                 OR jobs.created_at >= sqlc.narg('created_after'))
            AND (sqlc.narg('created_before')::timestamptz IS NULL
                 OR jobs.created_at < sqlc.narg('created_before'))
            AND (sqlc.narg('id_suffix')::text IS NULL
                 OR right(replace(jobs.id::text, '-', ''), length(sqlc.narg('id_suffix')))
                    = sqlc.narg('id_suffix'))
            AND (sqlc.narg('error')::text IS NULL
                 OR strpos(lower(jobs.last_error), lower(sqlc.narg('error'))) > 0)
            -- nullif: sqlc vet explains with '' (the store never sends it: not JSON).
            AND (sqlc.narg('payload_json')::text IS NULL
                 OR jobs.payload @> nullif(sqlc.narg('payload_json')::text, '')::jsonb)
           ), false)::boolean AS matched
    FROM jobs
    WHERE jobs.state = @state::job_state
      AND jobs.state IN ('dead', 'cancelled')
      AND jobs.id >= @low::uuid AND jobs.id <= @high::uuid
    ORDER BY jobs.id DESC
    LIMIT @max_walk::integer
) AS walked
WHERE walked.matched OR walked.walked = @max_walk::integer
ORDER BY walked.id DESC
LIMIT @max_jobs::integer;
