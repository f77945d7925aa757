-- +goose Up
-- The worker processes that are alive (the dashboard's Workers page and
-- `jobrun workers`): each worker writes its row when it starts and again
-- every heartbeat interval, with the jobs it is running and since when, and
-- deletes it when it stops. A row whose worker died stays until it is older
-- than three of its own intervals (readers then call it gone) and is
-- deleted by maintenance an hour after it was last written.
--
-- A new, empty table: no lock on anything that exists.
CREATE TABLE workers (
    owner        text        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    version      text        NOT NULL,
    queues       text[]      NOT NULL,
    concurrency  integer     NOT NULL,
    beat         interval    NOT NULL,
    running      jsonb       NOT NULL DEFAULT '[]',
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT workers_owner_bounded CHECK (length(owner) BETWEEN 1 AND 300),
    CONSTRAINT workers_host_bounded CHECK (length(host) <= 255),
    CONSTRAINT workers_beat_positive CHECK (beat > interval '0')
);

-- +goose Down
DROP TABLE workers;
