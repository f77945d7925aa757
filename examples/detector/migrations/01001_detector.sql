-- +goose Up
-- The detector's tables. They share jobrun's database (detection and delivery
-- jobs are jobrun jobs, enqueued in the same transaction as these rows) and
-- goose's version table, so the detector's versions start at 1001 and never
-- collide with jobrun's own (00001, 00002, ...).
--
-- Times are integer milliseconds since the epoch, as in the SQLite laboratory,
-- so both stores compare exactly the same numbers.

-- An ingested event. (node_id, request_id) is the replay key: the node is the
-- authenticated one, never a field of the body. digest is sha256 over the
-- canonical event and, like the whole row, is never rewritten (trigger below).
CREATE TABLE detector_events (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node_id      text   NOT NULL,
    request_id   text   NOT NULL,
    site         text   NOT NULL,
    address      text   NOT NULL,
    rule_version text   NOT NULL,
    occurred_ms  bigint NOT NULL,
    received_ms  bigint NOT NULL,
    digest       text   NOT NULL CHECK (digest ~ '^[0-9a-f]{64}$'),
    CONSTRAINT detector_events_replay_key UNIQUE (node_id, request_id)
);

-- +goose StatementBegin
CREATE FUNCTION detector_events_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'detector_events rows are immutable (event %)', OLD.id;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER detector_events_no_update BEFORE UPDATE ON detector_events
    FOR EACH ROW EXECUTE FUNCTION detector_events_immutable();

-- One row per event counted under a shared key (site|address|rule|window).
-- The primary key makes counting idempotent: a redelivered job finds its hit
-- already recorded and changes nothing. The rows are the rolling window's state.
CREATE TABLE detector_hits (
    event_id    bigint NOT NULL PRIMARY KEY REFERENCES detector_events (id),
    key         text   NOT NULL,
    occurred_ms bigint NOT NULL
);

CREATE INDEX detector_hits_key_time ON detector_hits (key, occurred_ms);

-- The total count per shared key, updated read-modify-write under the key's
-- lock: the race test checks it is exact.
CREATE TABLE detector_counters (
    key  text   PRIMARY KEY,
    hits bigint NOT NULL CHECK (hits >= 0)
);

-- A ban. expires_ms is fixed when the decision is made and never recomputed.
CREATE TABLE detector_decisions (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site         text   NOT NULL,
    address      text   NOT NULL,
    rule_version text   NOT NULL,
    event_id     bigint NOT NULL UNIQUE REFERENCES detector_events (id),
    decided_ms   bigint NOT NULL,
    expires_ms   bigint NOT NULL,
    CHECK (expires_ms > decided_ms)
);

CREATE INDEX detector_decisions_target ON detector_decisions (site, address, rule_version, expires_ms);

-- Agents receive signed snapshots. revision is the last one allocated.
CREATE TABLE detector_agents (
    agent_id text   PRIMARY KEY,
    endpoint text   NOT NULL,
    revision bigint NOT NULL DEFAULT 0 CHECK (revision >= 0)
);

-- Delivery intent (the outbox): written with its decision, one per agent.
-- snapshot_revision is set when a snapshot covering it has been allocated.
CREATE TABLE detector_intents (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    decision_id       bigint NOT NULL REFERENCES detector_decisions (id),
    agent_id          text   NOT NULL REFERENCES detector_agents (agent_id),
    created_ms        bigint NOT NULL,
    snapshot_revision bigint
);

CREATE INDEX detector_intents_uncovered ON detector_intents (agent_id) WHERE snapshot_revision IS NULL;

-- A snapshot: the exact bytes sent to one agent at one revision. signature is
-- NULL between allocation and signing (the crash-safe boundary: a retry signs
-- the stored bytes). superseded marks an unsent snapshot that went stale.
CREATE TABLE detector_snapshots (
    agent_id     text    NOT NULL REFERENCES detector_agents (agent_id),
    revision     bigint  NOT NULL CHECK (revision > 0),
    body         bytea   NOT NULL,
    signature    bytea,
    created_ms   bigint  NOT NULL,
    delivered_ms bigint,
    superseded   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (agent_id, revision)
);

-- +goose Down
DROP TABLE detector_snapshots;
DROP TABLE detector_intents;
DROP TABLE detector_agents;
DROP TABLE detector_decisions;
DROP TABLE detector_counters;
DROP TABLE detector_hits;
DROP TABLE detector_events;
DROP FUNCTION detector_events_immutable();
