-- +goose Up
-- The core tables of jobrun: jobs, their event history, the effect ledger and
-- schedules. Every CHECK below turns a state the store would never write into
-- a row the database refuses, so a bug shows up as an error, not as data.

CREATE TYPE job_state AS ENUM ('queued', 'leased', 'succeeded', 'cancelled', 'dead');

CREATE TYPE backoff_kind AS ENUM ('constant', 'linear', 'exponential');

-- jobs is a hot-update queue table: every job is inserted once and updated
-- two to four times (claim, heartbeats, completion) within seconds.
-- fillfactor 70 leaves room on each page so an updated row version usually
-- lands beside the old one, keeping heap pages dense and HOT updates possible
-- for the updates that touch no indexed column. The table churns far faster
-- than the default autovacuum thresholds (20% of the table) expect, so dead
-- tuples are vacuumed after 1% (plus 1000 rows) instead, and without cost
-- throttling: a bloated claim index is the usual way a PostgreSQL queue
-- slows down over a day.
CREATE TABLE jobs (
    id               uuid         PRIMARY KEY,
    queue            text         NOT NULL DEFAULT 'default',
    type             text         NOT NULL,
    payload          jsonb        NOT NULL DEFAULT '{}'::jsonb,
    priority         smallint     NOT NULL DEFAULT 0,
    state            job_state    NOT NULL DEFAULT 'queued',
    attempts         integer      NOT NULL DEFAULT 0,
    max_attempts     integer      NOT NULL DEFAULT 25,
    backoff_kind     backoff_kind NOT NULL DEFAULT 'exponential',
    backoff_base     interval     NOT NULL DEFAULT '1 second',
    backoff_max      interval     NOT NULL DEFAULT '1 hour',
    run_at           timestamptz  NOT NULL DEFAULT now(),
    lease_owner      text,
    lease_expires_at timestamptz,
    cancel_requested boolean      NOT NULL DEFAULT false,
    idempotency_key  text,
    last_error       text,
    created_at       timestamptz  NOT NULL DEFAULT now(),
    updated_at       timestamptz  NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CONSTRAINT jobs_queue_valid CHECK (queue <> '' AND length(queue) <= 128),
    CONSTRAINT jobs_type_valid CHECK (type <> '' AND length(type) <= 255),
    CONSTRAINT jobs_attempts_valid CHECK (attempts >= 0 AND attempts <= max_attempts),
    CONSTRAINT jobs_max_attempts_valid CHECK (max_attempts >= 1),
    CONSTRAINT jobs_backoff_valid CHECK (
        backoff_base > interval '0' AND backoff_max >= backoff_base
    ),
    -- A lease exists exactly while the job is leased.
    CONSTRAINT jobs_lease_matches_state CHECK (
        (state = 'leased') = (lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)
    ),
    -- finished_at is set exactly for the terminal states.
    CONSTRAINT jobs_finished_matches_state CHECK (
        (state IN ('succeeded', 'cancelled', 'dead')) = (finished_at IS NOT NULL)
    ),
    -- A queued job always has an attempt left; spent ones are dead.
    CONSTRAINT jobs_queued_has_attempts CHECK (state <> 'queued' OR attempts < max_attempts),
    CONSTRAINT jobs_idempotency_key_valid CHECK (
        idempotency_key IS NULL OR (idempotency_key <> '' AND length(idempotency_key) <= 512)
    ),
    CONSTRAINT jobs_last_error_bounded CHECK (last_error IS NULL OR length(last_error) <= 8192)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- The claim index: only queued rows, in exactly the claim order, so a claim
-- reads the first N entries of one queue and stops.
CREATE INDEX jobs_claim_idx ON jobs (queue, priority, run_at, id) WHERE state = 'queued';

-- The reaper's index: only leased rows, by expiry.
CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'leased';

-- The idempotency guard and ON CONFLICT target of enqueue.
CREATE UNIQUE INDEX jobs_idem_uniq ON jobs (queue, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

-- Purge walks finished jobs oldest first.
CREATE INDEX jobs_finished_idx ON jobs (finished_at) WHERE finished_at IS NOT NULL;

CREATE TABLE job_events (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     uuid        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now(),
    kind       text        NOT NULL,
    from_state job_state,
    to_state   job_state   NOT NULL,
    attempt    integer     NOT NULL DEFAULT 0,
    owner      text,
    detail     text,
    CONSTRAINT job_events_kind_valid CHECK (kind <> '' AND length(kind) <= 64),
    CONSTRAINT job_events_detail_bounded CHECK (detail IS NULL OR length(detail) <= 8192)
);

CREATE INDEX job_events_job_idx ON job_events (job_id, id);

-- Events are append-only and pruned by age: a BRIN index on the insert-ordered
-- timestamp is a few pages instead of a second B-tree.
CREATE INDEX job_events_at_brin ON job_events USING brin (at);

-- The effect ledger: one row per committed effect. Its primary key is what
-- makes a handler's commit callback run at most once per job.
CREATE TABLE processed_effects (
    scope      text        NOT NULL,
    key        text        NOT NULL,
    job_id     uuid        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

CREATE TABLE schedules (
    id              bigint       GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text         NOT NULL,
    type            text         NOT NULL,
    queue           text         NOT NULL DEFAULT 'default',
    payload         jsonb        NOT NULL DEFAULT '{}'::jsonb,
    priority        smallint     NOT NULL DEFAULT 0,
    max_attempts    integer      NOT NULL DEFAULT 25,
    cron            text,
    every           interval,
    timezone        text         NOT NULL DEFAULT 'UTC',
    next_run_at     timestamptz  NOT NULL,
    last_run_at     timestamptz,
    paused          boolean      NOT NULL DEFAULT false,
    created_at      timestamptz  NOT NULL DEFAULT now(),
    updated_at      timestamptz  NOT NULL DEFAULT now(),
    CONSTRAINT schedules_name_unique UNIQUE (name),
    CONSTRAINT schedules_name_valid CHECK (name <> '' AND length(name) <= 255),
    CONSTRAINT schedules_type_valid CHECK (type <> '' AND length(type) <= 255),
    CONSTRAINT schedules_queue_valid CHECK (queue <> '' AND length(queue) <= 128),
    CONSTRAINT schedules_max_attempts_valid CHECK (max_attempts >= 1),
    -- Exactly one of cron and every says when the schedule fires.
    CONSTRAINT schedules_one_trigger CHECK ((cron IS NULL) <> (every IS NULL)),
    CONSTRAINT schedules_every_positive CHECK (every IS NULL OR every > interval '0')
);

CREATE INDEX schedules_due_idx ON schedules (next_run_at) WHERE NOT paused;

-- +goose Down
DROP TABLE schedules;
DROP TABLE processed_effects;
DROP TABLE job_events;
DROP TABLE jobs;
DROP TYPE backoff_kind;
DROP TYPE job_state;
