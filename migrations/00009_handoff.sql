-- +goose Up
-- Handoff: an idle worker offers its free slots, and a single enqueue that
-- finds an offer for its queue leases the new job to that worker in the same
-- statement and sends the whole job on the worker's own channel. The worker
-- starts the handler when the notification arrives, with no claim round trip:
-- an idle worker's wake-up is then one round trip (the enqueue) instead of two.
--
-- An offer is a promise of a live, listening worker, and only lasts while the
-- worker keeps renewing it (every claim rewrites the owner's offers, and an
-- idle worker claims at least once per poll interval), so an offer of a
-- worker that died is ignored once expires_at passes. Offers are worth
-- nothing after a server crash, hence UNLOGGED: no WAL for the rows every
-- idle claim and every handoff rewrite, and an empty table after a crash.
CREATE UNLOGGED TABLE IF NOT EXISTS worker_offers (
    owner      text        NOT NULL,
    queue      text        NOT NULL,
    -- The LISTEN channel of the worker's notifier that receives its handoffs.
    channel    text        NOT NULL,
    -- How many more jobs the worker takes by handoff; the enqueue takes one.
    slots      integer     NOT NULL,
    -- The lease a handed job gets, the worker's own (as its claims would).
    lease      interval    NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (owner, queue),
    CONSTRAINT worker_offers_slots_valid CHECK (slots >= 0),
    CONSTRAINT worker_offers_channel_valid CHECK (channel <> '' AND length(channel) <= 63),
    CONSTRAINT worker_offers_lease_valid CHECK (lease > interval '0')
);

-- The enqueue looks offers up by queue; the claim rewrites them by owner (the
-- primary key).
CREATE INDEX IF NOT EXISTS worker_offers_queue_idx ON worker_offers (queue);

-- A job leased by its own enqueue (a handoff) that no heartbeat has confirmed
-- yet. If its lease runs out so, the worker most likely never received it
-- (it died, or its listening connection dropped, just after offering), so
-- the reaper gives it back without counting the attempt; the first heartbeat
-- and every claim clear the flag. A constant default makes this a
-- catalog-only change (PostgreSQL 11+); the lock_timeout keeps the instant of
-- ACCESS EXCLUSIVE lock it needs from queueing every claim behind a reader.
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS handed boolean NOT NULL DEFAULT false;

-- +goose Down
SET LOCAL lock_timeout = '5s';
-- squawk-ignore ban-drop-column
ALTER TABLE jobs DROP COLUMN IF EXISTS handed;
DROP TABLE IF EXISTS worker_offers;
