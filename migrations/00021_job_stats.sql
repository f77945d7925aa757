-- +goose Up
-- What the dashboard's charts read: per step of time, queue and job type,
-- how many attempts ended how, and histograms of the queue wait and run time
-- of the attempts that ended a job. Each outcome is counted in three rows,
-- of steps 1, 10 and 60 minutes wide (`width`, the step starting at `at`),
-- so that a chart of an hour, a day or a week reads at most 168 rows per
-- queue and type, whatever the traffic.
--
-- The elected maintenance leader rolls the outcome events (job_events, in id
-- order) into these rows. Charts read the rows, so every dashboard process
-- draws the same picture from the database and a restarted one has the past
-- as it was; a chart never reads the jobs or events behind them.
--
-- A histogram is 48 counts: bucket b holds durations from 2^(b/2) ms up to
-- the next bucket's start (bucket 0 everything under 1.41 ms, bucket 47
-- everything from 3.3 hours on), so a percentile read from it is within a
-- factor of 1.41 of the true one.
--
-- New tables: no lock on anything that exists.
CREATE TABLE job_stats (
    width     smallint    NOT NULL,
    at        timestamptz NOT NULL,
    queue     text        NOT NULL,
    type      text        NOT NULL,
    succeeded bigint      NOT NULL DEFAULT 0,
    failed    bigint      NOT NULL DEFAULT 0,
    dead      bigint      NOT NULL DEFAULT 0,
    cancelled bigint      NOT NULL DEFAULT 0,
    wait_ms   bigint[]    NOT NULL,
    run_ms    bigint[]    NOT NULL,
    PRIMARY KEY (width, at, queue, type),
    CONSTRAINT job_stats_width_valid CHECK (width IN (1, 10, 60)),
    CONSTRAINT job_stats_histograms CHECK (cardinality(wait_ms) = 48 AND cardinality(run_ms) = 48)
);

-- How far the roll-up has read job_events: one row. It starts at 0, so the
-- first roll-up also counts the events already kept (retention's 14 days by
-- default), in bounded batches.
CREATE TABLE job_stats_cursor (
    singleton     boolean     PRIMARY KEY DEFAULT true,
    last_event_id bigint      NOT NULL,
    rolled_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_stats_cursor_one_row CHECK (singleton)
);
INSERT INTO job_stats_cursor (last_event_id) VALUES (0);

-- +goose Down
DROP TABLE job_stats_cursor;
DROP TABLE job_stats;
