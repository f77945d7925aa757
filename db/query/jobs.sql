-- Queries on the jobs table: every state transition of the store contract.
-- Each transition that must be recorded writes its job_events rows in the same
-- statement (a data-modifying CTE), so a transition and its event are one
-- round trip and can never be separated.

-- name: JobInsert :one
-- Insert one job; on an idempotency-key conflict insert nothing and return no
-- row (the caller then reads the stored job). The enqueued event is written in
-- the same statement. meta is NULL unless there is trace context to carry.
WITH inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, idempotency_key, meta
    ) VALUES (
        @id, @queue, @type, @payload, @priority, @max_attempts,
        @backoff_kind, @backoff_base, @backoff_max,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval),
        sqlc.narg('idempotency_key'), coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb)
    )
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING *
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL, inserted.state, 0
    FROM inserted
)
SELECT * FROM inserted;

-- name: JobInsertNotify :one
-- JobInsert and the queue's notification in one statement, for a single
-- enqueue on an autocommit connection: one round trip, no BEGIN/COMMIT. The
-- final SELECT joins the notifying CTE so that it runs (a SELECT CTE nobody
-- references is never evaluated), and only when a row was inserted; PostgreSQL
-- delivers the notification when the statement's transaction commits, after
-- the job is visible. It always returns its row: a job with an idempotency key
-- is never handed off, so it never comes here (JobInsertQueuedNotify).
-- offered says whether an idle worker offered a slot for the queue as the
-- statement began, taken or not: the producer's hint (JobInsertQueuedNotify).
-- payload_json is the payload's JSON text as the store already encoded it to
-- validate it, so it is not encoded a second time to be sent (never empty: the
-- nullif only lets sqlc vet EXPLAIN the query with an empty placeholder). Only the
-- columns the database decides come back: the store knows every other one, and
-- decoding the payload and meta it just sent would be wasted work.
--
-- Handoff (migration 00009): a producer sends this statement only for a job it
-- may hand off (due now, without an idempotency key, small enough to travel in
-- a notification), and only while its enqueues to the queue find offers (see
-- JobInsertQueuedNotify). When an idle worker offers a slot for the queue,
-- the job is inserted already leased to that worker (attempt 1, handed, for
-- the offer's short lease until the worker confirms it), the claim is recorded, and the whole job goes to the
-- worker's channel instead of the queue's wake-up: the worker starts it
-- without claiming. SKIP LOCKED passes over an offer another enqueue or the
-- worker's own claim is rewriting. A queue with controls (paused, a
-- concurrency or a rate limit) is never handed to: only the claim enforces
-- those.
--
-- An enqueue must never fail because of how it is announced: NOTIFY refuses a
-- payload of 8000 bytes or more (or a channel name over 63 bytes), and a
-- refused NOTIFY aborts the statement, insert and all. The store's size check
-- is only a cheap first filter (so is the owner's length here): jsonb renders
-- a payload its own way (1e-40 as 42 digits). So the text a handoff sends is
-- built with the candidate offer, from the values the row gets (the job CTE,
-- computed once for both), and an offer is taken only when that very text is
-- under the limit and its channel a name NOTIFY takes. Otherwise the job is
-- queued and the queue's plain wake-up (a queue name, at most 128 characters)
-- goes out instead.
--
-- Comments stay out of the statement's body: psycopg caches its parsing of a
-- query only up to 4096 bytes, should this one ever run through a cursor.
WITH job AS (
    SELECT @id::uuid AS id, @queue::text AS queue, @type::text AS type,
           nullif(sqlc.arg('payload_json')::text, '')::jsonb AS payload,
           @priority::smallint AS priority, @max_attempts::integer AS max_attempts,
           @backoff_kind::backoff_kind AS backoff_kind,
           @backoff_base::interval AS backoff_base, @backoff_max::interval AS backoff_max,
           coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval)
               AS run_at,
           coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb) AS meta,
           now() AS created_at
), offer AS (
    UPDATE worker_offers
    SET slots = worker_offers.slots - 1
    FROM (
        SELECT candidate.owner, candidate.queue, handoff.note
        FROM job
        JOIN worker_offers AS candidate ON candidate.queue = job.queue
        CROSS JOIN LATERAL (
            SELECT json_build_object(
                'id', job.id, 'queue', job.queue, 'type', job.type,
                'payload', job.payload, 'priority', job.priority,
                'attempts', 1, 'max_attempts', job.max_attempts,
                'backoff_kind', job.backoff_kind,
                'backoff_base', extract(epoch FROM job.backoff_base),
                'backoff_max', extract(epoch FROM job.backoff_max),
                'run_at', job.run_at, 'lease_owner', candidate.owner,
                'lease_expires_at', job.created_at + candidate.lease,
                'created_at', job.created_at, 'meta', job.meta)::text AS note
        ) AS handoff
        WHERE candidate.slots > 0
          AND candidate.expires_at > now()
          AND octet_length(candidate.owner) <= 200
          AND octet_length(candidate.channel) <= 63
          AND octet_length(handoff.note) < 8000
          AND NOT EXISTS (
              SELECT 1 FROM queues
              WHERE queues.name = candidate.queue
                AND (queues.paused OR queues.concurrency_limit IS NOT NULL
                     OR queues.rate_limit IS NOT NULL)
          )
        LIMIT 1
        FOR UPDATE OF candidate SKIP LOCKED
    ) AS taken
    WHERE worker_offers.owner = taken.owner AND worker_offers.queue = taken.queue
    RETURNING worker_offers.channel, taken.note, worker_offers.owner, worker_offers.lease
), inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, meta,
        state, attempts, lease_owner, lease_expires_at, handed, created_at
    )
    SELECT job.id, job.queue, job.type, job.payload, job.priority, job.max_attempts,
           job.backoff_kind, job.backoff_base, job.backoff_max, job.run_at, job.meta,
           CASE WHEN offer.owner IS NULL THEN 'queued' ELSE 'leased' END::job_state,
           CASE WHEN offer.owner IS NULL THEN 0 ELSE 1 END,
           offer.owner, job.created_at + offer.lease, offer.owner IS NOT NULL,
           job.created_at
    FROM job
    LEFT JOIN offer ON true
    RETURNING id, queue, handed, run_at, created_at, lease_owner, lease_expires_at
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL::job_state,
           'queued'::job_state, 0, NULL::text
    FROM inserted
    UNION ALL
    SELECT inserted.id, inserted.created_at, 'claimed', 'queued'::job_state,
           'leased'::job_state, 1, inserted.lease_owner
    FROM inserted
    WHERE inserted.handed AND @record_claim::boolean
), notified AS (
    SELECT CASE WHEN inserted.handed
        THEN pg_notify(offer.channel, offer.note)
        ELSE pg_notify(@channel::text, inserted.queue) END
    FROM inserted
    LEFT JOIN offer ON true
)
SELECT inserted.run_at, inserted.created_at, inserted.lease_owner, inserted.lease_expires_at,
       EXISTS (SELECT FROM worker_offers AS w WHERE w.queue = inserted.queue
                   AND w.slots > 0 AND w.expires_at > now()) AS offered
FROM inserted CROSS JOIN notified;

-- name: JobInsertQueuedNotify :one
-- A single enqueue that is never handed off: JobInsert and the queue's
-- notification in one statement, without JobInsertNotify's look for an idle
-- worker's offer. That look costs the server about as much as the rest of the
-- insert even when no worker offers anything (its scans and locks are set up
-- on every execution), so a producer sends this statement instead whenever a
-- handoff is not allowed or its last enqueue to the queue found no offer.
-- offered says whether an idle worker offers a slot for the queue now: the
-- producer's hint to look for an offer again next time. No row: an
-- idempotency-key conflict (read the stored job).
WITH inserted AS (
    INSERT INTO jobs (
        id, queue, type, payload, priority, max_attempts,
        backoff_kind, backoff_base, backoff_max, run_at, idempotency_key, meta,
        state, created_at
    )
    VALUES (
        @id::uuid, @queue::text, @type::text,
        nullif(sqlc.arg('payload_json')::text, '')::jsonb, @priority::smallint,
        @max_attempts::integer, @backoff_kind::backoff_kind, @backoff_base::interval,
        @backoff_max::interval,
        coalesce(sqlc.narg('run_at')::timestamptz, now() + sqlc.arg('delay')::interval),
        sqlc.narg('idempotency_key')::text, coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb),
        'queued', now()
    )
    ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, queue, run_at, created_at
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT inserted.id, inserted.created_at, 'enqueued', NULL::job_state,
           'queued'::job_state, 0, NULL::text
    FROM inserted
), notified AS (
    SELECT pg_notify(@channel::text, inserted.queue) FROM inserted
)
SELECT inserted.run_at, inserted.created_at,
       EXISTS (
           SELECT 1 FROM worker_offers
           WHERE worker_offers.queue = inserted.queue
             AND worker_offers.slots > 0
             AND worker_offers.expires_at > now()
       ) AS offered
FROM inserted CROSS JOIN notified;

-- name: JobInsertCopy :copyfrom
INSERT INTO jobs (
    id, queue, type, payload, priority, max_attempts,
    backoff_kind, backoff_base, backoff_max, run_at, idempotency_key,
    created_at, updated_at
) VALUES (
    @id, @queue, @type, @payload, @priority, @max_attempts,
    @backoff_kind, @backoff_base, @backoff_max, @run_at, @idempotency_key,
    @created_at, @updated_at
);

-- name: JobInsertCopyTraced :copyfrom
-- JobInsertCopy with the meta column, for a batch enqueued under a trace
-- context; batches without one keep the narrower COPY and the column default.
INSERT INTO jobs (
    id, queue, type, payload, priority, max_attempts,
    backoff_kind, backoff_base, backoff_max, run_at, idempotency_key,
    created_at, updated_at, meta
) VALUES (
    @id, @queue, @type, @payload, @priority, @max_attempts,
    @backoff_kind, @backoff_base, @backoff_max, @run_at, @idempotency_key,
    @created_at, @updated_at, @meta
);

-- name: JobInsertKeyedMany :many
-- Insert keyed jobs of a batch in one statement; returns the ids actually
-- inserted. Keys that already exist insert nothing (the caller compares
-- bodies). The arrays are parallel: element i of each is job i. meta, the
-- batch's trace context, is one value for all of them (NULL: none).
INSERT INTO jobs (
    id, queue, type, payload, priority, max_attempts,
    backoff_kind, backoff_base, backoff_max, run_at, idempotency_key,
    created_at, updated_at, meta
)
-- Several unnest() calls in one select list run in lockstep, zipping the
-- parallel arrays into rows.
SELECT
    unnest(@ids::uuid[]), unnest(@queues::text[]), unnest(@types::text[]),
    unnest(@payloads::jsonb[]), unnest(@priorities::smallint[]),
    unnest(@max_attempts::integer[]), unnest(@backoff_kinds::backoff_kind[]),
    unnest(@backoff_bases::interval[]), unnest(@backoff_maxes::interval[]),
    unnest(@run_ats::timestamptz[]), unnest(@idempotency_keys::text[]),
    @created_at::timestamptz, @created_at::timestamptz,
    coalesce(sqlc.narg('meta')::jsonb, '{}'::jsonb)
ON CONFLICT (queue, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: JobGetByIdempotencyKey :one
-- plan: jobs only by index jobs_idem_uniq
SELECT * FROM jobs WHERE queue = @queue::text AND idempotency_key = @idempotency_key::text;

-- name: JobGetByIdempotencyKeys :many
SELECT jobs.*
FROM jobs
JOIN (
    SELECT unnest(@queues::text[]) AS queue, unnest(@idempotency_keys::text[]) AS key
) AS wanted ON jobs.queue = wanted.queue AND jobs.idempotency_key = wanted.key;

-- name: JobNotify :exec
-- Wake listeners of a queue. Sent inside the producing transaction, so
-- PostgreSQL delivers it only at commit, when the job is visible.
SELECT pg_notify(@channel::text, @queue::text);

-- name: JobGet :one
-- plan: jobs only by index jobs_pkey
SELECT * FROM jobs WHERE id = @id;

-- name: JobClaim :many
-- Lease up to max_jobs due jobs of the given queues, in priority, run_at, id
-- order, and record one claimed event per job when record_events is set (the
-- terminal event mode skips them). SKIP LOCKED lets concurrent claimers take
-- disjoint rows without waiting on each other.
--
-- The queue controls (migration 00004) are enforced here, per queue, so they
-- hold across every worker: a paused queue yields nothing; a queue with a
-- concurrency limit yields at most its limit minus its leased jobs; a queue
-- with a rate limit at most what is left of its current window, and the
-- claims are counted on its row in the same statement. Queues without a row,
-- or whose row sets no limit, keep the lock-free path.
--
-- What a claim reads follows the jobs it leases and the number of priority
-- levels queued in its queues, never the number of delayed jobs (see levels);
-- scripts/plans checks it on the plan.
--
-- The queue list and max_jobs are read through scalar subqueries wherever
-- the planner would estimate from their values (array lengths, LIMITs). A
-- prepared statement is planned with its values (a custom plan) until a
-- generic plan looks no dearer; with the values visible, the generic plan
-- always looked dearer, so every claim was planned afresh, which cost more
-- than running it (about 1 ms of a 2 ms idle claim). Hidden behind
-- subqueries, both plans estimate alike and PostgreSQL keeps the generic one.
-- plan: jobs only by index jobs_claim_idx, jobs_pkey
-- plan(idle): buffers <= 150
WITH RECURSIVE controls AS MATERIALIZED (
    -- The row of every wanted queue that has a limit, locked until the claim
    -- commits: claimers of one limited queue take turns, so two of them can
    -- never both see room for its last slot or its last claim of a window.
    -- Locked in name order, so claimers of overlapping queue lists cannot
    -- deadlock. FOR UPDATE returns the newest committed version of a row it
    -- waited for, so the window counter read here includes the claims of the
    -- claimer that held the lock before.
    SELECT queues.name, queues.paused, queues.concurrency_limit, queues.rate_limit,
           queues.rate_interval, queues.window_start, queues.window_claims
    FROM queues
    WHERE queues.name = ANY ((SELECT @queues::text[])::text[])
      AND (queues.concurrency_limit IS NOT NULL OR queues.rate_limit IS NOT NULL)
    ORDER BY queues.name
    FOR UPDATE OF queues
), allowance AS MATERIALIZED (
    -- How many jobs each wanted queue may yield to this claim.
    SELECT wanted.queue,
           CASE
               WHEN coalesce(controls.paused, queues.paused, false) THEN 0
               ELSE least(
                   @max_jobs::integer,
                   -- queue_leased_count takes a fresh snapshot, after the
                   -- lock above: it sees the leases of earlier lock holders.
                   CASE WHEN controls.concurrency_limit IS NULL THEN @max_jobs::integer
                        ELSE greatest(0, controls.concurrency_limit
                                         - queue_leased_count(wanted.queue)) END,
                   CASE
                       WHEN controls.rate_limit IS NULL THEN @max_jobs::integer
                       WHEN controls.window_start = date_bin(
                                controls.rate_interval,
                                coalesce(sqlc.narg('now')::timestamptz, now()),
                                timestamptz '1970-01-01 00:00:00+00')
                           THEN greatest(0, controls.rate_limit - controls.window_claims)
                       -- The row is already in a later window of this
                       -- rate_interval than this claim's clock (a claimer
                       -- that began earlier and waited for the lock): claim
                       -- nothing rather than count against a window the row
                       -- no longer tracks. Only a claim can write such a
                       -- window: a later one of the current interval lies
                       -- after the current time.
                       WHEN controls.window_start > date_bin(
                                controls.rate_interval,
                                coalesce(sqlc.narg('now')::timestamptz, now()),
                                timestamptz '1970-01-01 00:00:00+00')
                            AND controls.window_start = date_bin(
                                controls.rate_interval, controls.window_start,
                                timestamptz '1970-01-01 00:00:00+00')
                           THEN 0
                       -- No window yet, an earlier one, or one of an earlier
                       -- rate_interval (not on this interval's boundaries): a
                       -- fresh window, never a stall until its end.
                       ELSE controls.rate_limit
                   END)
           END AS room
    FROM unnest((SELECT @queues::text[])) AS wanted (queue)
    -- Paused as of this statement's snapshot, for queues without limits.
    LEFT JOIN queues ON queues.name = wanted.queue
    LEFT JOIN controls ON controls.name = wanted.queue
), levels AS (
    -- A loose index scan of jobs_claim_idx, one priority level per step, so
    -- the claim never reads a not-yet-due job: jobs_claim_idx orders a queue's
    -- entries by priority first, so `run_at <= now` alone cannot stop a scan
    -- before the delayed entries of every priority, and an idle claim would
    -- read all of them. Each step finds the queue's next queued priority
    -- (one index descent) and leases up to `wanted` due jobs of it, oldest
    -- first (a range scan that stops at the first not-yet-due entry), then
    -- carries what is still wanted to the next level. The cost follows the
    -- number of priority levels in use, never the number of delayed jobs.
    -- Rows are locked in the level that takes them and only as many as are
    -- still wanted, so the claim locks exactly the jobs it leases (across
    -- several queues, `picked` below may still trim to max_jobs). SKIP
    -- LOCKED skips jobs another claimer holds and moves on to the next due
    -- one, in this level or the next.
    SELECT allowance.queue, (-32769)::integer AS priority, allowance.room AS wanted,
           '{}'::uuid[] AS ids, '{}'::timestamptz[] AS run_ats
    FROM allowance
    WHERE allowance.room > 0
    UNION ALL
    SELECT levels.queue, nxt.priority::integer, levels.wanted - taken.n, taken.ids,
           taken.run_ats
    FROM levels
    CROSS JOIN LATERAL (
        -- The first entry of the next level (its key, from the index alone).
        SELECT jobs.priority, jobs.run_at, jobs.id
        FROM jobs
        WHERE jobs.state = 'queued'
          AND jobs.queue = levels.queue
          AND jobs.priority > levels.priority
        ORDER BY jobs.priority, jobs.run_at, jobs.id
        LIMIT 1
    ) AS nxt
    CROSS JOIN LATERAL (
        SELECT count(*)::integer AS n,
               coalesce(array_agg(due.id), '{}') AS ids,
               coalesce(array_agg(due.run_at), '{}') AS run_ats
        FROM (
            -- A no-op LIMIT (wanted <= max_jobs) that tells the planner how
            -- few rows a level yields: it cannot know `wanted`, guesses a
            -- tenth of the queue, and, times the ten steps it assumes a
            -- recursion takes, the plan's estimated cost would grow with the
            -- table past jit_above_cost; JIT compiling the claim then costs
            -- tens of milliseconds on every call.
            SELECT locked.id, locked.run_at
            FROM (
                -- The (run_at, id) bound is implied (nxt is the level's first
                -- entry) but starts the scan at that entry, not at the head of
                -- the level: under load the head holds the entries of jobs
                -- claimed since the last vacuum, which the probe above has
                -- just walked once already.
                SELECT jobs.id, jobs.run_at
                FROM jobs
                WHERE jobs.state = 'queued'
                  AND jobs.queue = levels.queue
                  AND jobs.priority = nxt.priority
                  AND (jobs.run_at, jobs.id) >= (nxt.run_at, nxt.id)
                  AND jobs.run_at <= coalesce(sqlc.narg('now')::timestamptz, now())
                ORDER BY jobs.run_at, jobs.id
                LIMIT levels.wanted
                FOR UPDATE SKIP LOCKED
            ) AS locked
            LIMIT (SELECT @max_jobs::integer)
        ) AS due
    ) AS taken
    WHERE levels.wanted > 0
), picked AS (
    -- The best max_jobs of what the levels leased (only a claim of several
    -- queues can have more).
    SELECT taken.id
    FROM levels
    CROSS JOIN LATERAL unnest(levels.ids) WITH ORDINALITY AS taken (id, i)
    ORDER BY levels.priority, levels.run_ats[taken.i], taken.id
    LIMIT (SELECT @max_jobs::integer)
), claimed AS (
    -- The picked ids come as one array, unnested: the planner cannot know how
    -- few rows picked yields (the LIMIT above hides max_jobs) and would guess
    -- hundreds, enough to join them to jobs by reading the whole table when
    -- it is small; an unnested array it guesses at ten, probed by primary key.
    UPDATE jobs
    SET state = 'leased',
        attempts = jobs.attempts + 1,
        -- A uniqueness key held only while queued is given up at the first
        -- claim (migration 00016): were it kept, the job's return to queued
        -- (a retry, a snooze) could collide with a job enqueued meanwhile.
        unique_key = CASE WHEN (jobs.unique_states & job_state_bit('leased')) <> 0
                          THEN jobs.unique_key END,
        lease_owner = @owner::text,
        lease_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
        handed = false,
        updated_at = now()
    FROM unnest((SELECT array_agg(picked.id) FROM picked)::uuid[]) AS chosen (id)
    WHERE jobs.id = chosen.id
    RETURNING jobs.*
), left_over AS (
    -- The slots this claim leaves free: what its handoff offers are worth.
    SELECT (SELECT @max_jobs::integer) - count(*)::integer AS slots FROM claimed
), offered AS (
    -- The owner's handoff offers (migration 00009) are rewritten by every
    -- claim, in the same statement, so they never outlive what the claim
    -- knew: with offer_channel set and slots left free, one offer per wanted
    -- queue of that many slots, valid for offer_ttl (an idle worker claims
    -- again within its poll interval, which renews them). A job handed
    -- through one is leased for offer_lease: the short time its worker has
    -- to confirm it (see JobHeartbeat), not the worker's whole lease.
    INSERT INTO worker_offers (owner, queue, channel, slots, lease, expires_at)
    SELECT @owner::text, wanted.queue, sqlc.narg('offer_channel')::text, left_over.slots,
           sqlc.arg('offer_lease')::interval, now() + sqlc.arg('offer_ttl')::interval
    FROM left_over
    CROSS JOIN unnest((SELECT @queues::text[])) AS wanted (queue)
    WHERE sqlc.narg('offer_channel')::text IS NOT NULL AND left_over.slots > 0
    ON CONFLICT (owner, queue) DO UPDATE
    SET channel = excluded.channel, slots = excluded.slots, lease = excluded.lease,
        expires_at = excluded.expires_at
), withdrawn AS (
    -- Otherwise (no offer asked for, or no slot left) the owner's offers go,
    -- and so do those of queues it no longer claims.
    DELETE FROM worker_offers
    USING left_over
    WHERE worker_offers.owner = @owner::text
      AND (sqlc.narg('offer_channel')::text IS NULL OR left_over.slots <= 0
           OR worker_offers.queue <> ALL ((SELECT @queues::text[])::text[]))
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner)
    SELECT claimed.id, claimed.updated_at, 'claimed', 'queued', 'leased',
           claimed.attempts, claimed.lease_owner
    FROM claimed
    WHERE @record_events::boolean
), counted AS (
    -- Count this claim's jobs into the window of each rate-limited queue
    -- (its row is locked by controls above). The counter is reset when the
    -- claim falls in a new window.
    UPDATE queues
    SET window_claims = CASE
            WHEN queues.window_start = date_bin(
                    queues.rate_interval, coalesce(sqlc.narg('now')::timestamptz, now()),
                    timestamptz '1970-01-01 00:00:00+00')
                THEN queues.window_claims
            ELSE 0 END + tally.claims,
        window_start = date_bin(
            queues.rate_interval, coalesce(sqlc.narg('now')::timestamptz, now()),
            timestamptz '1970-01-01 00:00:00+00')
    FROM (
        SELECT claimed.queue, count(*)::integer AS claims FROM claimed GROUP BY claimed.queue
    ) AS tally
    WHERE queues.name = tally.queue
      AND queues.rate_limit IS NOT NULL
)
SELECT claimed.* FROM claimed
-- The claim commits without waiting for its WAL to reach disk (for this
-- transaction only: set_config's third argument). No guarantee needs that
-- flush: a claim the server forgets in a crash leaves the job queued as it
-- was, and the forgotten attempt's completion is refused by the lease fence,
-- so its commit callback never runs; a completion that does commit flushes
-- the WAL up to its own commit record, the claim's with it. An idle claim
-- waits about 0.5 ms less.
WHERE (SELECT set_config('synchronous_commit', 'off', true)) = 'off';

-- name: JobHeartbeat :many
-- Extend the leases the owner still holds under the lease fence (same
-- attempt, not expired) to db now + lease, except those whose cancel was
-- requested: the owner must stop those jobs. ids and attempts are parallel
-- arrays: job i was claimed as attempt i.
--
-- A heartbeat also confirms a handed job (migration 00009): its worker has it,
-- and its short first lease (the offer's) becomes the worker's own.
--
-- The fence's values are compared with columns of the materialized input,
-- not with literals or parameters (see JobRecordOutcomes): each held job is
-- one primary-key probe.
-- plan: jobs only by index jobs_pkey; rows removed <= 500
WITH held AS MATERIALIZED (
    SELECT unnest((SELECT @ids::uuid[])) AS id,
           unnest((SELECT @attempts::integer[])) AS attempt,
           'leased'::job_state AS state,
           @owner::text AS owner,
           coalesce(sqlc.narg('now')::timestamptz, now()) AS now
)
UPDATE jobs
SET lease_expires_at = held.now + @lease::interval,
    handed = false,
    updated_at = now()
FROM held
WHERE jobs.id = held.id
  AND jobs.attempts = held.attempt
  AND jobs.state = held.state
  AND jobs.lease_owner = held.owner
  AND jobs.lease_expires_at > held.now
  AND NOT jobs.cancel_requested
RETURNING jobs.id;

-- name: JobRecordOutcomes :many
-- Record the outcomes of attempts, any mix of kinds, in one statement. The
-- arrays are parallel: job i, claimed as attempt i, ended with outcome i;
-- detail i is its error or reason ('' for none: the last error stays), delay
-- i how long a snooze waits. Only jobs the owner holds under the lease fence (owner,
-- attempt, unexpired lease) change; the others are left alone and not
-- returned. job_outcome_state decides the next state and job_backoff_delay a
-- failed job's wait; a hand-back or snooze gives the attempt back.
-- attempt_limit i (0 for none) bounds a failure below the job's own
-- max_attempts and makes delay i its wait instead of the backoff: the policy
-- for a job the worker cannot run (an unknown type, a payload that does not
-- validate), which must not take the job's whole retry budget.
--
-- The waiting dependents (migration 00018) of the jobs it ends are queued
-- once they wait for nothing more (job_waits, migration 00019), or
-- cancelled by a dependency that ended dead or cancelled when they said so
-- (and theirs in turn, the rest of a chain), in the same statement, and
-- their queues are notified on channel.
--
-- result_ids and result_values (parallel, usually empty) carry what handlers
-- returned, as JSON text: stored in job_results for the jobs this statement
-- leaves succeeded, so the result commits with the completion and a job a
-- requested cancel ended keeps none. Each stored result, and each job left
-- dead or cancelled, is announced on the channel 'jobrun.finished' (payload:
-- the job id) for the clients waiting on it (Client.result); a job that
-- returned nothing and succeeded is announced to nobody, so the common
-- completion sends no notification, and such a waiter finds it by polling.
--
-- Each outcome must be one primary-key probe, whatever the statistics say.
-- The fence's values (state, owner, clock) are therefore columns of the
-- materialized input, not literals or parameters on jobs: the statistics of
-- a table analyzed while few jobs were leased put the rows matching
-- `state = 'leased'` or `lease_owner = $owner` at one, and the planner then
-- drives the update from that one row (a partial index on leased jobs, or a
-- scan of the whole table) and rescans the batch once per row it finds: a
-- batch of 1,000 outcomes cost some 170 ms instead of 10 (rows compared:
-- leased jobs x batch size). The arrays are hidden behind scalar subqueries
-- too, so the planner guesses ten outcomes, not the batch's size: a nested
-- loop of primary-key probes then always looks cheaper than hashing a scan
-- of the table.
-- The dependents a batch frees that still wait for another dependency are
-- filtered out of verdict too (the scale database's case: 622 rows removed in all).
-- plan: jobs only by index jobs_pkey; rows removed <= 1000
-- plan: job_dependencies only by index job_dependencies_pkey
-- plan: job_waits only by index job_waits_pkey
-- plan: job_concurrency only by index job_concurrency_pkey
WITH RECURSIVE outcome AS MATERIALIZED (
    SELECT unnest((SELECT @ids::uuid[])) AS id,
           unnest((SELECT @attempts::integer[])) AS attempt,
           unnest((SELECT @outcomes::job_outcome[])) AS kind,
           nullif(unnest((SELECT @details::text[])), '') AS detail,
           unnest((SELECT @delays::interval[])) AS delay,
           nullif(unnest((SELECT @attempt_limits::integer[])), 0) AS attempt_limit,
           'leased'::job_state AS held_state,
           @owner::text AS owner,
           coalesce(sqlc.narg('now')::timestamptz, now()) AS now
), recorded AS (
    UPDATE jobs
    -- least() skips a NULL attempt_limit: the job's own max_attempts then.
    SET state = job_outcome_state(outcome.kind, jobs.cancel_requested, jobs.attempts,
                                  least(jobs.max_attempts, outcome.attempt_limit)),
        attempts = CASE
            WHEN outcome.kind IN ('release', 'snooze') AND NOT jobs.cancel_requested
                THEN greatest(jobs.attempts - 1, 0)
            ELSE jobs.attempts END,
        run_at = CASE job_outcome_state(outcome.kind, jobs.cancel_requested, jobs.attempts,
                                        least(jobs.max_attempts, outcome.attempt_limit))
            WHEN 'queued' THEN outcome.now + CASE
                WHEN outcome.kind = 'fail' AND outcome.attempt_limit IS NULL
                    THEN job_backoff_delay(jobs.backoff_kind, jobs.backoff_base,
                                           jobs.backoff_max, jobs.attempts,
                                           @jitter::double precision)
                ELSE outcome.delay END
            ELSE jobs.run_at END,
        finished_at = CASE job_outcome_state(outcome.kind, jobs.cancel_requested, jobs.attempts,
                                             least(jobs.max_attempts, outcome.attempt_limit))
            WHEN 'queued' THEN NULL
            ELSE outcome.now END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error = coalesce(left(outcome.detail, 8192), jobs.last_error),
        updated_at = now()
    FROM outcome
    WHERE jobs.id = outcome.id
      AND jobs.attempts = outcome.attempt
      AND jobs.state = outcome.held_state
      AND jobs.lease_owner = outcome.owner
      AND jobs.lease_expires_at > outcome.now
    RETURNING jobs.id, jobs.state, jobs.attempts, jobs.run_at, jobs.finished_at,
              jobs.last_error, jobs.updated_at, outcome.kind, outcome.detail,
              CASE WHEN jobs.state IN ('dead', 'cancelled')
                  THEN pg_notify('jobrun.finished', jobs.id::text) END AS announced
), stored AS (
    INSERT INTO job_results (job_id, value, stored_at)
    SELECT recorded.id, returned.value::jsonb, recorded.updated_at
    FROM (SELECT unnest((SELECT @result_ids::uuid[])) AS id,
                 unnest((SELECT @result_values::text[])) AS value) AS returned
    JOIN recorded ON recorded.id = returned.id AND recorded.state = 'succeeded'
    ON CONFLICT (job_id) DO UPDATE SET value = excluded.value, stored_at = excluded.stored_at
    -- A data-modifying CTE runs to completion, RETURNING included, even unread.
    RETURNING job_results.job_id, pg_notify('jobrun.finished', job_results.job_id::text)
), ended AS MATERIALIZED (
    -- The jobs this statement ended, which their waiting dependents wait for.
    SELECT array_agg(recorded.id) AS ids,
           array_agg(recorded.id) FILTER (WHERE recorded.state IN ('dead', 'cancelled'))
               AS failed_ids
    FROM recorded
    WHERE recorded.state IN ('succeeded', 'dead', 'cancelled')
), freed AS MATERIALIZED (
    -- Their dependents (migration 00018). Ids go through arrays, here and
    -- below, so that each lookup is an index probe (job_dependencies' and
    -- job_waits' keys, jobs_pkey) whatever the statistics say: a join the
    -- planner may drive from the other side could read every edge or every
    -- waiting job on each completion.
    SELECT DISTINCT edge.job_id
    FROM job_dependencies AS edge
    WHERE edge.depends_on = ANY ((SELECT ended.ids FROM ended)::uuid[])
), waits AS (
    -- Take the ended jobs out of what each dependent still waits for
    -- (migration 00019). The row update serializes two statements ending a
    -- dependent's last dependencies at once: the second works on the array
    -- the first committed, so exactly one of them leaves it empty.
    UPDATE job_waits
    SET pending = array(SELECT still.id FROM unnest(job_waits.pending) AS still (id)
                        WHERE still.id <> ALL ((SELECT ended.ids FROM ended)::uuid[]))
    WHERE job_waits.job_id = ANY ((SELECT array_agg(freed.job_id) FROM freed)::uuid[])
    RETURNING job_waits.job_id, cardinality(job_waits.pending) = 0 AS ready
), doomed (id) AS (
    -- The waiting jobs a failure here cancels: those that wait through a
    -- 'cancel' edge for a job this statement left dead or cancelled, and, in
    -- turn, those that wait that way for them (the rest of a chain).
    SELECT failed.id FROM unnest((SELECT ended.failed_ids FROM ended)::uuid[]) AS failed (id)
    UNION
    SELECT next.job_id
    FROM doomed
    -- Lateral and fenced by OFFSET 0 (which keeps the planner from flattening
    -- it into a join), so each step probes job_dependencies' key, never hashes it.
    CROSS JOIN LATERAL (
        SELECT edge.job_id FROM job_dependencies AS edge
        WHERE edge.depends_on = doomed.id AND edge.if_failed = 'cancel'
        OFFSET 0
    ) AS next
    JOIN LATERAL (
        SELECT jobs.state FROM jobs WHERE jobs.id = next.job_id LIMIT 1
    ) AS dependent ON dependent.state = (SELECT 'waiting'::job_state)
), verdict AS MATERIALIZED (
    -- Released: the doomed, cancelled, and those left waiting for nothing, queued.
    SELECT doomed.id AS job_id, true AS doomed
    FROM doomed
    WHERE doomed.id <> ALL ((SELECT ended.failed_ids FROM ended)::uuid[])
    UNION ALL
    SELECT waits.job_id, false
    FROM waits
    WHERE waits.ready
      AND waits.job_id <> ALL (coalesce((SELECT array_agg(doomed.id) FROM doomed), '{}')::uuid[])
), released AS (
    -- Queued (or cancelled) once: the state check, evaluated again on a row
    -- another statement released meanwhile, keeps it to once.
    UPDATE jobs
    SET state = (CASE WHEN jobs.id = ANY ((SELECT array_agg(verdict.job_id) FROM verdict
                                          WHERE verdict.doomed)::uuid[])
                      THEN 'cancelled' ELSE 'queued' END)::job_state,
        finished_at = CASE WHEN jobs.id = ANY ((SELECT array_agg(verdict.job_id) FROM verdict
                                                WHERE verdict.doomed)::uuid[])
                           THEN now() END,
        last_error = CASE WHEN jobs.id = ANY ((SELECT array_agg(verdict.job_id) FROM verdict
                                               WHERE verdict.doomed)::uuid[])
            THEN 'cancelled: a job it depends on ended dead or cancelled' ELSE jobs.last_error END,
        updated_at = now()
    WHERE jobs.id = ANY ((SELECT array_agg(verdict.job_id) FROM verdict)::uuid[])
      -- Behind a subquery: the literal would let the planner read jobs_waiting_idx
      -- (all waiting jobs) instead of probing the primary key for these ids.
      AND jobs.state = (SELECT 'waiting'::job_state)
    RETURNING jobs.id, jobs.state, jobs.updated_at,
              CASE WHEN jobs.state = 'queued' THEN pg_notify(@channel::text, jobs.queue) END
                  AS woken
), released_logged AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt)
    SELECT released.id, released.updated_at,
           CASE WHEN released.state = 'queued' THEN 'ready' ELSE 'cancelled' END,
           'waiting', released.state, 0
    FROM released
), logged AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner, detail)
    SELECT recorded.id, recorded.updated_at,
           CASE WHEN recorded.state <> 'queued' THEN recorded.state::text
                WHEN recorded.kind = 'fail' THEN 'failed'
                WHEN recorded.kind = 'release' THEN 'released'
                ELSE 'snoozed' END,
           'leased', recorded.state, recorded.attempts, @owner, left(recorded.detail, 8192)
    FROM recorded
), keyed AS (
    -- The jobs it ended that held a slot of their concurrency key (migration
    -- 00020) give it up; the caller admits the next jobs of those keys.
    UPDATE job_concurrency
    SET status = 'ended'
    WHERE job_concurrency.job_id = ANY ((SELECT ended.ids FROM ended)::uuid[])
      -- Behind a subquery: the literal would let the planner read the partial
      -- index of every admitted row instead of probing the primary key.
      AND job_concurrency.status = (SELECT 'admitted'::text)
    RETURNING job_concurrency.job_id, job_concurrency.key
)
SELECT recorded.id, recorded.state, recorded.attempts, recorded.run_at, recorded.finished_at,
       recorded.last_error, recorded.updated_at, keyed.key AS concurrency_key
FROM recorded
LEFT JOIN keyed ON keyed.job_id = recorded.id;

-- name: JobReapExpired :many
-- Leases that ran out by db now are failed attempts: each job goes where
-- job_outcome_state sends a failure (queued after its own backoff, dead, or
-- cancelled when a cancel was requested), with its event. SKIP LOCKED lets
-- reapers on several workers split the work instead of queueing behind each
-- other, and skips a row whose completion is committing right now.
--
-- A handed job (migration 00009) whose lease ran out before any heartbeat
-- confirmed it most likely never reached its worker: it is given back as a
-- hand-back is, queued and due now with the attempt not counted (cancelled
-- if a cancel was requested), so a worker that died just after offering
-- costs its handed jobs a delay, never an attempt.
-- plan: index jobs_leased_idx
WITH expired AS (
    SELECT id, (handed AND NOT cancel_requested) AS unconfirmed
    FROM jobs
    WHERE state = 'leased'
      AND lease_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY lease_expires_at
    LIMIT @max_jobs
    FOR UPDATE SKIP LOCKED
), reaped AS (
    UPDATE jobs
    SET state = CASE WHEN expired.unconfirmed THEN 'queued'::job_state
            ELSE job_outcome_state('fail', jobs.cancel_requested, jobs.attempts,
                                   jobs.max_attempts) END,
        attempts = CASE WHEN expired.unconfirmed THEN greatest(jobs.attempts - 1, 0)
            ELSE jobs.attempts END,
        run_at = CASE
            WHEN expired.unconfirmed THEN coalesce(sqlc.narg('now')::timestamptz, now())
            WHEN job_outcome_state('fail', jobs.cancel_requested, jobs.attempts,
                                   jobs.max_attempts) = 'queued'
                THEN coalesce(sqlc.narg('now')::timestamptz, now())
                     + job_backoff_delay(jobs.backoff_kind, jobs.backoff_base,
                                         jobs.backoff_max, jobs.attempts,
                                         @jitter::double precision)
            ELSE jobs.run_at END,
        finished_at = CASE
            WHEN expired.unconfirmed THEN NULL
            WHEN job_outcome_state('fail', jobs.cancel_requested, jobs.attempts,
                                   jobs.max_attempts) = 'queued' THEN NULL
            ELSE coalesce(sqlc.narg('now')::timestamptz, now()) END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        cancel_requested = false,
        handed = false,
        last_error = CASE WHEN expired.unconfirmed
            THEN 'handed to a worker that never confirmed it: given back, the attempt not counted'
            ELSE 'lease expired: the worker stopped heartbeating' END,
        updated_at = now()
    FROM expired
    WHERE jobs.id = expired.id
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, detail)
    SELECT reaped.id, reaped.updated_at, 'reaped', 'leased', reaped.state,
           reaped.attempts, reaped.last_error
    FROM reaped
)
SELECT * FROM reaped;

-- name: JobCancel :one
-- The cancel decision and its transition in one statement. The job's row is
-- locked first, so the state it is decided on is the state it is changed from:
-- a queued or waiting job ends cancelled now ('cancelled'; a waiting job's
-- dependents are settled by the maintenance leader); a leased one is flagged
-- ('requested': it can't be stopped from here, so the owner's next heartbeat
-- leaves it out and the worker cancels the handler), unless it already was
-- ('unchanged'); a finished job is left alone ('refused'). Returns the job as
-- it is now, the state it was found in and that action; no row: no such job.
-- actor (who asked, e.g. an operator through the web dashboard) is recorded in
-- the event's detail as 'by <actor>'; NULL leaves the detail empty.
-- plan: jobs only by index jobs_pkey
WITH target AS (
    SELECT jobs.id, jobs.state, jobs.cancel_requested FROM jobs WHERE jobs.id = @id FOR UPDATE
), cancelled AS (
    UPDATE jobs
    SET state = 'cancelled',
        finished_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        updated_at = now()
    FROM target
    WHERE jobs.id = target.id AND target.state IN ('queued', 'waiting')
    RETURNING jobs.*
), flagged AS (
    UPDATE jobs
    SET cancel_requested = true, updated_at = now()
    FROM target
    WHERE jobs.id = target.id AND target.state = 'leased' AND NOT target.cancel_requested
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, owner, detail)
    SELECT cancelled.id, cancelled.updated_at, 'cancelled',
           target.state, 'cancelled'::job_state,
           cancelled.attempts, NULL, 'by ' || sqlc.narg('actor')::text
    FROM cancelled JOIN target ON target.id = cancelled.id
    UNION ALL
    SELECT flagged.id, flagged.updated_at, 'cancel_requested',
           'leased'::job_state, 'leased'::job_state,
           flagged.attempts, flagged.lease_owner, 'by ' || sqlc.narg('actor')::text
    FROM flagged
), after AS (
    SELECT * FROM cancelled
    UNION ALL
    SELECT * FROM flagged
    UNION ALL
    -- Unchanged or refused: the row as locked (nothing above wrote it).
    SELECT jobs.* FROM jobs JOIN target ON target.id = jobs.id
    WHERE NOT (target.state IN ('queued', 'waiting')
               OR (target.state = 'leased' AND NOT target.cancel_requested))
)
SELECT after.*,
       target.state AS found_state,
       (CASE
            WHEN target.state IN ('queued', 'waiting') THEN 'cancelled'
            WHEN target.state = 'leased' AND NOT target.cancel_requested THEN 'requested'
            WHEN target.state = 'leased' THEN 'unchanged'
            ELSE 'refused'
        END)::text AS action
FROM after JOIN target ON target.id = after.id;

-- name: JobRetry :one
-- The retry decision and its transition in one statement: a dead or cancelled
-- job goes back to queued, due now ('retried'), or, with a concurrency key,
-- to waiting for its key's turn (the caller then admits); any other is left alone
-- ('refused'). The row is locked first, so the state it is decided on is the
-- state it is changed from. A dead job has spent its attempts, so one is given
-- back (the events keep the full count). Its max_attempts stays as enqueued:
-- it is part of the body an idempotent replay is compared with. A uniqueness
-- key it no longer holds is dropped, so the retry cannot collide with a job
-- that took the key since. Returns the
-- job as it is now, the state it was found in and that action; no row: no
-- such job.
-- plan: jobs only by index jobs_pkey
WITH target AS (
    SELECT jobs.id, jobs.state,
           (SELECT slot.key FROM job_concurrency AS slot WHERE slot.job_id = jobs.id)
               AS concurrency_key
    FROM jobs WHERE jobs.id = @id FOR UPDATE
), retried AS (
    UPDATE jobs
    -- A job with a concurrency key (migration 00020) waits for its key's turn
    -- again: the caller admits for its key in the same transaction.
    SET state = (CASE WHEN target.concurrency_key IS NULL THEN 'queued'
                      ELSE 'waiting' END)::job_state,
        run_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        attempts = least(jobs.attempts, jobs.max_attempts - 1),
        cancel_requested = false,
        finished_at = NULL,
        -- It keeps its uniqueness key only if it holds it now (a policy that
        -- lasts until purged): a key it gave up may have a new holder.
        unique_key = CASE WHEN (jobs.unique_states & job_state_bit(jobs.state)) <> 0
                          THEN jobs.unique_key END,
        updated_at = now()
    FROM target
    WHERE jobs.id = target.id AND target.state IN ('dead', 'cancelled')
    RETURNING jobs.*
), in_line AS (
    UPDATE job_concurrency
    SET status = 'waiting'
    WHERE job_concurrency.job_id = (SELECT retried.id FROM retried)
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, detail)
    SELECT retried.id, retried.updated_at, 'retried', target.state, retried.state,
           retried.attempts, 'by ' || sqlc.narg('actor')::text
    FROM retried JOIN target ON target.id = retried.id
), after AS (
    SELECT * FROM retried
    UNION ALL
    SELECT jobs.* FROM jobs JOIN target ON target.id = jobs.id
    WHERE target.state NOT IN ('dead', 'cancelled')
)
SELECT after.*,
       target.state AS found_state,
       (CASE WHEN target.state IN ('dead', 'cancelled') THEN 'retried' ELSE 'refused' END)::text
           AS action,
       target.concurrency_key
FROM after JOIN target ON target.id = after.id;

-- name: JobRunNow :one
-- "Run now": a queued job that is not due yet (delayed, scheduled for later,
-- or waiting out a retry's backoff) becomes due at once ('moved'); a queued
-- job already due is left as it is ('unchanged'); a job in any other state
-- is refused ('refused'). The row is locked first, so the state decided on is
-- the state changed from. A moved job gets a 'run_now' event (detail: who
-- asked). Returns the job as it is now, the state it was found in and the
-- action; no row: no such job.
-- plan: jobs only by index jobs_pkey
WITH target AS (
    SELECT jobs.id, jobs.state, jobs.run_at FROM jobs WHERE jobs.id = @id FOR UPDATE
), moved AS (
    UPDATE jobs
    SET run_at = now(),
        updated_at = now()
    FROM target
    WHERE jobs.id = target.id AND target.state = 'queued' AND target.run_at > now()
    RETURNING jobs.*
), recorded AS (
    INSERT INTO job_events (job_id, at, kind, from_state, to_state, attempt, detail)
    SELECT moved.id, moved.updated_at, 'run_now', 'queued', 'queued', moved.attempts,
           'by ' || sqlc.narg('actor')::text
    FROM moved
), after AS (
    SELECT * FROM moved
    UNION ALL
    SELECT jobs.* FROM jobs JOIN target ON target.id = jobs.id
    WHERE NOT (target.state = 'queued' AND target.run_at > now())
)
SELECT after.*,
       target.state AS found_state,
       (CASE WHEN target.state <> 'queued' THEN 'refused'
             WHEN target.run_at > now() THEN 'moved'
             ELSE 'unchanged' END)::text AS action
FROM after JOIN target ON target.id = after.id;

-- name: JobDeleteMany :many
-- An operator's delete: the given jobs that are not leased, with their
-- events, results, progress and dependency edges and waits (the jobs they wait for);
-- returns the ids deleted. A leased job is
-- running and is left alone (cancel it first). The rows are locked in id
-- order before anything is deleted, and the state is checked again on the
-- row as locked, so a job claimed meanwhile is not deleted under its worker.
-- Ledger rows stay, as for a purge: a replayed idempotency key still finds
-- its effect done.
-- plan: jobs only by index jobs_pkey; job_events only by index job_events_job_idx
-- plan: job_dependencies only by index job_dependencies_job_idx
-- plan: job_waits only by index job_waits_pkey; job_concurrency only by index job_concurrency_pkey
WITH doomed AS (
    SELECT jobs.id
    FROM jobs
    WHERE jobs.id = ANY (@ids::uuid[]) AND jobs.state <> 'leased'
    ORDER BY jobs.id
    FOR UPDATE
), dropped_events AS (
    DELETE FROM job_events WHERE job_id IN (SELECT id FROM doomed)
), dropped_results AS (
    DELETE FROM job_results WHERE job_id IN (SELECT id FROM doomed)
), dropped_progress AS (
    DELETE FROM job_progress WHERE job_id IN (SELECT id FROM doomed)
), dropped_edges AS (
    DELETE FROM job_dependencies
    WHERE job_id = ANY ((SELECT array_agg(doomed.id) FROM doomed)::uuid[])
), dropped_waits AS (
    DELETE FROM job_waits
    WHERE job_id = ANY ((SELECT array_agg(doomed.id) FROM doomed)::uuid[])
), dropped_slots AS (
    DELETE FROM job_concurrency
    WHERE job_id = ANY ((SELECT array_agg(doomed.id) FROM doomed)::uuid[])
)
DELETE FROM jobs WHERE id IN (SELECT id FROM doomed)
RETURNING id;

-- name: JobPurgeState :execrows
-- Delete up to batch_size jobs that finished in one terminal state more than
-- the given age ago, with their events, results, dependency edges and waits, oldest
-- first. Ledger rows stay: they
-- outlive their jobs (EffectPrune), so replaying an old idempotency key after
-- a purge cannot run its effect again. SKIP LOCKED, so a batch never waits on
-- a row someone else holds; bounded batches keep every lock short. One state
-- at a time, so retention gives each state its own age and an operator's
-- purge of every state is three passes; jobs_finished_state_idx (migration
-- 00006) makes each one index range scan.
-- plan: index jobs_finished_state_idx; job_events only by index job_events_job_idx; job_results only by index job_results_pkey
-- plan: job_dependencies only by index job_dependencies_job_idx
-- plan: job_waits only by index job_waits_pkey; job_concurrency only by index job_concurrency_pkey
WITH doomed AS (
    SELECT id
    FROM jobs
    WHERE state = @state::job_state
      AND finished_at IS NOT NULL
      AND finished_at < coalesce(sqlc.narg('now')::timestamptz, now()) - @older_than::interval
    ORDER BY finished_at
    LIMIT @batch_size
    FOR UPDATE SKIP LOCKED
), dropped_events AS (
    DELETE FROM job_events WHERE job_id IN (SELECT id FROM doomed)
), dropped_results AS (
    DELETE FROM job_results WHERE job_id IN (SELECT id FROM doomed)
), dropped_edges AS (
    -- A finished job waits for nothing any more: its dependency edges go with it,
    -- found by key (an array: a semi-join could hash the whole table).
    DELETE FROM job_dependencies
    WHERE job_id = ANY ((SELECT array_agg(doomed.id) FROM doomed)::uuid[])
), dropped_waits AS (
    DELETE FROM job_waits
    WHERE job_id = ANY ((SELECT array_agg(doomed.id) FROM doomed)::uuid[])
), dropped_slots AS (
    DELETE FROM job_concurrency
    WHERE job_id = ANY ((SELECT array_agg(doomed.id) FROM doomed)::uuid[])
)
DELETE FROM jobs WHERE id IN (SELECT id FROM doomed);

-- name: JobList :many
-- A page of jobs, newest first (ids are UUIDv7, ordered by creation). The
-- cursor is the last id of the previous page.
-- plan(dead, dead-next, cancelled): jobs only by index jobs_dead_cancelled_idx; no sort
SELECT *
FROM jobs
WHERE (sqlc.narg('queue')::text IS NULL OR queue = sqlc.narg('queue'))
  AND (sqlc.narg('state')::job_state IS NULL OR state = sqlc.narg('state'))
  AND (sqlc.narg('type')::text IS NULL OR type = sqlc.narg('type'))
  AND (sqlc.narg('created_after')::timestamptz IS NULL
       OR created_at >= sqlc.narg('created_after'))
  AND (sqlc.narg('created_before')::timestamptz IS NULL
       OR created_at < sqlc.narg('created_before'))
  AND (sqlc.narg('cursor')::uuid IS NULL OR id < sqlc.narg('cursor'))
ORDER BY id DESC
LIMIT @max_jobs;

-- name: JobDepth :many
-- plan: seq scan on jobs: it counts every job, finished ones too, by queue and state
SELECT queue, state, count(*)::bigint AS count, min(created_at)::timestamptz AS oldest_created_at
FROM jobs
GROUP BY queue, state
ORDER BY queue, state;

-- name: JobQueueStats :many
-- Per queue: jobs waiting (queued), those of them due now, jobs leased, and
-- the lag: how long the oldest due job has waited since its run_at (not its
-- created_at: a job delayed to later is not late until it is due). Only the partial indexes are read: the queued half is an
-- index-only scan of jobs_claim_idx (queue, priority, run_at, id WHERE
-- queued), the leased half walks jobs_leased_idx, so the cost follows the
-- backlog and the running jobs, never the finished history, however large.
-- plan: jobs only by index jobs_claim_idx, jobs_leased_idx
WITH waiting AS (
    SELECT queue,
           count(*) AS queued,
           count(*) FILTER (WHERE run_at <= now()) AS due,
           min(run_at) FILTER (WHERE run_at <= now()) AS oldest_due_run_at
    FROM jobs
    WHERE state = 'queued'
    GROUP BY queue
), running AS (
    SELECT queue, count(*) AS leased
    FROM jobs
    WHERE state = 'leased'
    GROUP BY queue
)
SELECT coalesce(waiting.queue, running.queue)::text AS queue,
       coalesce(waiting.queued, 0)::bigint AS queued,
       coalesce(waiting.due, 0)::bigint AS due,
       coalesce(running.leased, 0)::bigint AS leased,
       -- How long the oldest due job has waited past its run_at; 0 when none is due.
       greatest(coalesce(now() - waiting.oldest_due_run_at, '0'::interval),
                '0'::interval)::interval AS lag
FROM waiting
FULL JOIN running ON running.queue = waiting.queue
ORDER BY 1;

-- name: JobStateCounts :one
-- How many jobs are in each state, for the tabs of the dashboard's jobs
-- page, in work bounded by the jobs that are not succeeded: each live state
-- and dead and cancelled are counted exactly from their partial indexes;
-- succeeded, most of a busy table, is not counted but estimated: the live
-- rows of jobs the server's statistics report, less the others.
-- plan: jobs only by index jobs_claim_idx, jobs_leased_idx, jobs_lease_idx, jobs_leased_queue_idx, jobs_waiting_idx, jobs_dead_cancelled_idx
SELECT (SELECT count(*) FROM jobs WHERE jobs.state = 'queued')::bigint AS queued,
       (SELECT count(*) FROM jobs WHERE jobs.state = 'leased')::bigint AS leased,
       (SELECT count(*) FROM jobs WHERE jobs.state = 'waiting')::bigint AS waiting,
       (SELECT count(*) FROM jobs WHERE jobs.state = 'dead')::bigint AS dead,
       (SELECT count(*) FROM jobs WHERE jobs.state = 'cancelled')::bigint AS cancelled,
       pg_catalog.pg_stat_get_live_tuples(to_regclass('jobs'))::bigint AS estimated_total;
