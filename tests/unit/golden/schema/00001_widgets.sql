-- +goose Up
-- A fixture schema for the generator's golden tests: one column per type the
-- plugin maps, nullable and not, arrays and enums.
CREATE TYPE mood AS ENUM ('happy', 'sad', 'so-so');

CREATE TABLE widgets (
    id         bigserial   PRIMARY KEY,
    uid        uuid        NOT NULL,
    name       text        NOT NULL,
    label      varchar(64),
    small      smallint    NOT NULL DEFAULT 0,
    medium     integer,
    price      numeric     NOT NULL DEFAULT 0,
    ratio      double precision,
    ratio4     real,
    active     boolean     NOT NULL DEFAULT true,
    blob       bytea,
    doc        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    raw        json,
    at         timestamptz NOT NULL DEFAULT now(),
    local_at   timestamp,
    day        date,
    clock      time,
    span       interval,
    tags       text[]      NOT NULL DEFAULT '{}',
    scores     int8[],
    mood       mood        NOT NULL DEFAULT 'happy',
    maybe_mood mood
);

CREATE TABLE widget_notes (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    widget_id bigint NOT NULL,
    body      text   NOT NULL
);

-- +goose Down
DROP TABLE widget_notes;
DROP TABLE widgets;
DROP TYPE mood;
