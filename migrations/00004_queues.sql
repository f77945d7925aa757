-- +goose NO TRANSACTION
-- +goose Up
-- Queue controls, enforced by the claim statement itself so they hold across
-- every worker: a paused flag, a fleet-wide concurrency limit (at most N
-- leased jobs of the queue at once) and a rate limit (at most N claims per
-- interval). A queue without a row here is unlimited and not paused: no row
-- is needed to use a queue.
--
-- The file runs without a transaction because the leased-jobs index is built
-- CONCURRENTLY: jobs is the live, hot table, and a plain CREATE INDEX would
-- block every claim and completion while it builds. Each statement is
-- idempotent, so a migration that stopped half-way can simply run again.

-- The rate limit is a fixed-window counter: windows are aligned to the epoch
-- (date_bin of the claim's database now by rate_interval), window_start names
-- the window the counter belongs to and window_claims counts its claims. A
-- claim in a later window starts a new count.
CREATE TABLE IF NOT EXISTS queues (
    name              text        PRIMARY KEY,
    paused            boolean     NOT NULL DEFAULT false,
    concurrency_limit integer,
    rate_limit        integer,
    rate_interval     interval,
    window_start      timestamptz,
    window_claims     integer     NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT queues_name_valid CHECK (name <> '' AND length(name) <= 128),
    CONSTRAINT queues_concurrency_limit_valid CHECK (
        concurrency_limit IS NULL OR concurrency_limit >= 1
    ),
    -- A rate is a count and an interval, both or neither.
    CONSTRAINT queues_rate_valid CHECK (
        (rate_limit IS NULL) = (rate_interval IS NULL)
        AND (rate_limit IS NULL OR rate_limit >= 1)
        AND (rate_interval IS NULL OR rate_interval > interval '0')
    ),
    CONSTRAINT queues_window_claims_valid CHECK (window_claims >= 0)
);

-- How many jobs of one queue are leased right now: the claim counts them for
-- every queue with a concurrency limit. Only leased rows are indexed, so the
-- count reads at most as many entries as the queue has running jobs (about
-- its limit), whatever the size of the table. (squawk assumes every file runs
-- in a transaction; this one says NO TRANSACTION above.)
-- squawk-ignore ban-concurrent-index-creation-in-transaction
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_leased_queue_idx ON jobs (queue)
    WHERE state = 'leased';

-- The number of leased jobs of a queue, counted with a fresh snapshot.
-- VOLATILE on purpose: a volatile function takes a new snapshot for its query
-- (READ COMMITTED), while the claim statement that calls it reads with the
-- snapshot taken when it began. The claim calls this only after it has locked
-- the queue's row; leases committed by a claimer that held that lock before
-- it are then counted, which is what makes the limit fleet-wide instead of
-- only as good as the claim's starting snapshot.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION queue_leased_count(queue_name text) RETURNS integer
    LANGUAGE sql VOLATILE STRICT
AS $$
    SELECT count(*)::integer FROM jobs WHERE state = 'leased' AND queue = queue_name
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION IF EXISTS queue_leased_count(text);
DROP INDEX CONCURRENTLY IF EXISTS jobs_leased_queue_idx;
DROP TABLE IF EXISTS queues;
