-- +goose Up
-- Concurrency limited per key (NewJob.concurrency_key, concurrency_limit):
-- at most `limit` jobs of one key are admitted at a time, fleet-wide,
-- while the jobs of other keys keep flowing.
--
-- A job with a key is enqueued 'waiting' (the state the claim never reads,
-- migration 00018), with a row here. It is admitted (made 'queued', its row
-- 'admitted') while fewer than its limit of its key's jobs are admitted;
-- an admitted job holds its key's slot while queued (a retry, a snooze, a
-- delay) and while leased, and gives it up when it ends ('ended'). So the
-- claim never looks at keys, pays nothing for them, and never stalls on a
-- key at its limit: the waiting jobs of that key are not in its index.
--
-- Admission runs under a transaction-scoped advisory lock per key, in a
-- statement of its own after the lock is taken, so it counts what every
-- earlier holder committed: the enqueue that adds a job, and, after a
-- completion that ended admitted jobs, the admission of the next ones.
-- The maintenance leader ends the rows of jobs that ended outside a
-- completion (a reaper, an operator) and admits for their keys.
--
-- A job's own limit is kept with it (key_limit; NULL: none given, and its
-- type declares none); without one, its queue's key_limit applies
-- (jobrun queues limit Q --per-key N), and without either the key is not
-- limited. That column is no claim control: a queue that sets only it keeps
-- the claim's lock-free path.
--
-- A new, empty table: no lock on anything that exists. No foreign key:
-- the statements that purge or delete a job delete its row with it. The
-- column added to queues is nullable without a default: a catalog change.
CREATE TABLE job_concurrency (
    job_id    uuid    PRIMARY KEY,
    key       text    NOT NULL,
    key_limit integer,
    status    text    NOT NULL DEFAULT 'waiting',
    CONSTRAINT job_concurrency_limit_valid CHECK (key_limit IS NULL OR key_limit >= 1),
    CONSTRAINT job_concurrency_status_valid CHECK (status IN ('waiting', 'admitted', 'ended'))
);
-- A key's waiting jobs in enqueue order (ids are time-ordered): who is admitted next.
CREATE INDEX job_concurrency_waiting_idx ON job_concurrency (key, job_id)
    WHERE status = 'waiting';
-- A key's admitted jobs: how many slots are taken.
CREATE INDEX job_concurrency_admitted_idx ON job_concurrency (key)
    WHERE status = 'admitted';

ALTER TABLE queues ADD COLUMN key_limit integer
    CONSTRAINT queues_key_limit_valid CHECK (key_limit IS NULL OR key_limit >= 1);

-- +goose Down
DROP TABLE job_concurrency;
-- squawk-ignore ban-drop-column
ALTER TABLE queues DROP COLUMN IF EXISTS key_limit;
