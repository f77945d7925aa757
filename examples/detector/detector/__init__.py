"""The detector: jobrun's reference application.

Nodes post signed events; the detector counts them per shared key (site,
address, rule version, window) in a rolling window, bans an address that
reaches a rule's threshold, and delivers signed snapshots of the bans in force
to every agent. It exists to show, with tests that can fail, what jobrun's
contract buys an application: a job enqueued in the same transaction as the
row that caused it, an effect committed with the job's completion, key locks
that serialise a shared counter across worker processes, and an outbox that a
crash cannot empty.

The same behaviour runs on two stores behind one port (:mod:`detector.port`):
the single-node SQLite laboratory (:mod:`detector.lab`) and PostgreSQL on
jobrun (:mod:`detector.postgres`).
"""
