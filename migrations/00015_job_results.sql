-- +goose Up
-- What a handler returned (a JSON value), kept for its job once the job
-- succeeded: written by the statement that records the completion, so a job
-- is never seen succeeded without its result, and a result never exists for
-- a job that did not succeed (a cancel requested before the completion
-- wins, and stores nothing).
--
-- A table of its own rather than a column of jobs: most jobs return
-- nothing, and the claim, which reads jobs on every call, never reads this.
-- No foreign key: the statement that purges a job deletes its result with
-- it, as it deletes its events, without a trigger on every deleted row.
--
-- A new, empty table: no lock on anything that exists.
CREATE TABLE job_results (
    job_id    uuid        PRIMARY KEY,
    value     jsonb       NOT NULL,
    stored_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE job_results;
