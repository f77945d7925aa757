-- +goose Up
-- Where an attempt's outcome takes a job, decided in one place.
--
-- A worker reports each attempt as an outcome: complete, fail, release (hand
-- back unfinished, attempt not counted), snooze (run again later, attempt not
-- counted) or cancel (the handler ended its own job). The reaper reports an
-- expired lease as a failed attempt. The functions below are the only place
-- the rules live: which state follows, and how long a failed job waits. Every
-- query that records an outcome calls them, so fail, reap and the completer
-- cannot drift apart.

CREATE TYPE job_outcome AS ENUM ('complete', 'fail', 'release', 'snooze', 'cancel');

-- The state an outcome leaves a leased job in. A requested cancel wins over
-- everything; a failure with no attempt left is dead; a failure, a hand-back
-- or a snooze otherwise queues the job again.
-- +goose StatementBegin
CREATE FUNCTION job_outcome_state(
    outcome job_outcome, cancel_requested boolean, attempts integer, max_attempts integer
) RETURNS job_state
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN cancel_requested OR outcome = 'cancel' THEN 'cancelled'::job_state
        WHEN outcome = 'complete' THEN 'succeeded'::job_state
        WHEN outcome = 'fail' AND attempts >= max_attempts THEN 'dead'::job_state
        ELSE 'queued'::job_state
    END
$$;
-- +goose StatementEnd

-- How long a job waits after failed attempt number `attempt` (1 for the first
-- run): `base` grown by `kind`, never more than `cap`. `jitter` spreads the
-- wait by up to that fraction either way (0.1: within 10%), still never past
-- `cap`, so jobs that failed together do not all retry in the same instant.
-- +goose StatementBegin
CREATE FUNCTION job_backoff_delay(
    kind backoff_kind, base interval, cap interval, attempt integer, jitter double precision
) RETURNS interval
    LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
    -- Seconds as double precision: base * 2^39 would overflow an interval.
    SELECT make_interval(secs => greatest(0, least(cap_s, grown_s * (1 + jitter * (2 * random() - 1)))))
    FROM (
        SELECT cap_s, least(cap_s, CASE kind
            WHEN 'constant' THEN base_s
            WHEN 'linear' THEN base_s * n
            ELSE base_s * power(2::double precision, least(n - 1, 60))
        END) AS grown_s
        FROM (
            SELECT extract(epoch FROM base)::double precision AS base_s,
                   extract(epoch FROM cap)::double precision AS cap_s,
                   greatest(attempt, 1) AS n
        ) AS given
    ) AS backoff
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION job_backoff_delay(backoff_kind, interval, interval, integer, double precision);
DROP FUNCTION job_outcome_state(job_outcome, boolean, integer, integer);
DROP TYPE job_outcome;
