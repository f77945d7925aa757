-- The SQLite laboratory's schema: the same tables as the PostgreSQL migration
-- (examples/detector/migrations), plus lab_jobs, the lab's own durable job
-- table (on PostgreSQL the jobs are jobrun's). Times are epoch milliseconds.
PRAGMA foreign_keys = ON;

CREATE TABLE IF NOT EXISTS detector_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id      TEXT    NOT NULL,
    request_id   TEXT    NOT NULL,
    site         TEXT    NOT NULL,
    address      TEXT    NOT NULL,
    rule_version TEXT    NOT NULL,
    occurred_ms  INTEGER NOT NULL,
    received_ms  INTEGER NOT NULL,
    digest       TEXT    NOT NULL CHECK (length(digest) = 64),
    UNIQUE (node_id, request_id)
);

CREATE TRIGGER IF NOT EXISTS detector_events_no_update BEFORE UPDATE ON detector_events
BEGIN
    SELECT RAISE(ABORT, 'detector_events rows are immutable');
END;

CREATE TABLE IF NOT EXISTS detector_hits (
    event_id    INTEGER NOT NULL PRIMARY KEY REFERENCES detector_events (id),
    key         TEXT    NOT NULL,
    occurred_ms INTEGER NOT NULL
);

CREATE INDEX IF NOT EXISTS detector_hits_key_time ON detector_hits (key, occurred_ms);

CREATE TABLE IF NOT EXISTS detector_counters (
    key  TEXT    PRIMARY KEY,
    hits INTEGER NOT NULL CHECK (hits >= 0)
);

CREATE TABLE IF NOT EXISTS detector_decisions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    site         TEXT    NOT NULL,
    address      TEXT    NOT NULL,
    rule_version TEXT    NOT NULL,
    event_id     INTEGER NOT NULL UNIQUE REFERENCES detector_events (id),
    decided_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL,
    CHECK (expires_ms > decided_ms)
);

CREATE TABLE IF NOT EXISTS detector_agents (
    agent_id TEXT    PRIMARY KEY,
    endpoint TEXT    NOT NULL,
    revision INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0)
);

CREATE TABLE IF NOT EXISTS detector_intents (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    decision_id       INTEGER NOT NULL REFERENCES detector_decisions (id),
    agent_id          TEXT    NOT NULL REFERENCES detector_agents (agent_id),
    created_ms        INTEGER NOT NULL,
    snapshot_revision INTEGER
);

CREATE TABLE IF NOT EXISTS detector_snapshots (
    agent_id     TEXT    NOT NULL REFERENCES detector_agents (agent_id),
    revision     INTEGER NOT NULL CHECK (revision > 0),
    body         BLOB    NOT NULL,
    signature    BLOB,
    created_ms   INTEGER NOT NULL,
    delivered_ms INTEGER,
    superseded   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, revision)
);

-- The lab's durable jobs: kind 'detect' (ref = event id) or 'deliver'
-- (ref = agent id). done_ms is set in the transaction that commits the effect.
CREATE TABLE IF NOT EXISTS lab_jobs (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    kind     TEXT    NOT NULL CHECK (kind IN ('detect', 'deliver')),
    ref      TEXT    NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    done_ms  INTEGER
);

CREATE INDEX IF NOT EXISTS lab_jobs_pending ON lab_jobs (id) WHERE done_ms IS NULL;
