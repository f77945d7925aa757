-- The table `jobrun demo` writes its handlers' effects to. It is a demo
-- fixture, not part of jobrun's schema, so no migration creates it: the demo
-- runs this file on its own scratch database, and sqlc reads it (sqlc.yaml)
-- to type the queries in db/query/demo.sql.
CREATE TABLE IF NOT EXISTS demo_effects (
    job_id uuid PRIMARY KEY
);
