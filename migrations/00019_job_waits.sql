-- +goose Up
-- What each waiting job still waits for (NewJob.depends_on): the ids of its
-- dependencies that had not ended, written when it is enqueued waiting.
--
-- The statement that records outcomes removes the jobs it ends from these
-- arrays and releases the dependents left with none. Reading the
-- dependencies' states instead cannot do this alone: two completions that
-- end a dependent's last two dependencies at once each read the other's
-- dependency as still running (each statement's snapshot predates the
-- other's commit), and neither releases it. The update of this one row per
-- dependent serializes them: the second waits for the first to commit and
-- then works on the array the first left, so exactly one of them finds it
-- empty. Removing an id is idempotent, so a dependency that ends twice (a
-- retry after it died) is not counted twice.
--
-- The maintenance leader's settling pass still reads the states, for the
-- dependencies no completion ended (a reaper, an operator's cancel) and for
-- waiting jobs enqueued before this migration, which have no row here.
--
-- A new, empty table: no lock on anything that exists. No foreign key: the
-- statements that purge or delete a job delete its row here with it.
CREATE TABLE job_waits (
    job_id  uuid   PRIMARY KEY,
    pending uuid[] NOT NULL
);

-- +goose Down
DROP TABLE job_waits;
