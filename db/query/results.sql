-- What handlers returned (migration 00015): written with the completion by
-- JobRecordOutcomes, deleted with the job by JobPurgeState.

-- name: JobResultOf :one
-- A job's state, its last error and what its handler returned (NULL when it
-- returned nothing or has not succeeded): what Client.result needs to decide
-- between the value, an error and waiting longer.
-- plan: jobs only by index jobs_pkey; job_results only by index job_results_pkey
SELECT jobs.id, jobs.type, jobs.state, jobs.last_error, job_results.value AS result
FROM jobs
LEFT JOIN job_results ON job_results.job_id = jobs.id
WHERE jobs.id = @id;
