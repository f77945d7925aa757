-- +goose Up
-- Metadata jobrun carries with a job but never interprets as payload: today the
-- W3C trace context (`traceparent`, `tracestate`) of the code that enqueued it,
-- so the job's span joins the trace of the request that caused it. Written
-- only when there is something to write; every other job keeps the default.
-- A constant default makes this a catalog-only change (PostgreSQL 11+): the
-- table is not rewritten. It still takes jobs' ACCESS EXCLUSIVE lock for an
-- instant, so it gives up rather than queue every claim behind a long reader.
SET LOCAL lock_timeout = '5s';
ALTER TABLE jobs ADD COLUMN meta jsonb NOT NULL DEFAULT '{}'::jsonb;

-- +goose Down
SET LOCAL lock_timeout = '5s';
-- squawk-ignore ban-drop-column
ALTER TABLE jobs DROP COLUMN meta;
