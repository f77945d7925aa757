-- +goose Up
-- What a running handler says of its progress (JobContext.progress): how far
-- it is (0 to 1) and a short message, for the attempt that said it. Written
-- by the worker's heartbeat, which carries the latest report of each job it
-- runs, so a handler may report as often as it likes at no cost per call.
--
-- A table of its own rather than columns of jobs: only running jobs that
-- report have a row, the claim and the completion never touch it, and
-- maintenance deletes the rows of attempts that have ended. Readers show a
-- row only while its job is leased as that attempt, by that owner (a
-- hand-back gives the attempt number back, so the owner tells two claims of
-- one attempt number apart).
--
-- A new, empty table: no lock on anything that exists.
CREATE TABLE job_progress (
    job_id     uuid        PRIMARY KEY,
    attempt    integer     NOT NULL,
    owner      text        NOT NULL,
    fraction   real        NOT NULL,
    message    text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_progress_fraction_range CHECK (fraction >= 0 AND fraction <= 1),
    CONSTRAINT job_progress_message_bounded CHECK (length(message) <= 200)
);

-- +goose Down
DROP TABLE job_progress;
