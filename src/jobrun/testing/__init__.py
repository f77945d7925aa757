"""jobrun's test kit: test handlers and enqueueing code without standing the system up.

- :func:`make_job` builds a :class:`~jobrun.domain.Job` as a worker sees it after
  a claim, with any field overridden.
- :func:`run_job` (and :func:`run_job_sync`) runs one job's handler as a worker
  would (real context, payload validated through the handler's type, Cancel,
  Snooze, timeout) and returns a :class:`JobResult`: completed with its commit
  callback captured, failed, cancelled or snoozed.
- :class:`RecordingProducer` (and :class:`SyncRecordingProducer`) records what
  code under test enqueues, in memory, with the store's validation and
  idempotency rules, and asserts on it (``assert_enqueued``). A test double
  for unit tests only.
- :func:`eventually` (and :func:`eventually_sync`) waits for a condition
  in a test instead of sleeping a fixed time.
- :mod:`jobrun.testing.pytest_plugin`, loaded by pytest automatically once
  jobrun is installed, gives a real database per test (``jobrun_database_url``,
  ``jobrun_pool``, ``jobrun_store``, ``jobrun_sync_producer``), cloned from a
  migrated template on ``$JOBRUN_TEST_DATABASE_URL`` or an embedded server.

Nothing in this package is used by jobrun at run time.
"""

from jobrun.testing.factory import make_job
from jobrun.testing.recording import RecordingProducer, SyncRecordingProducer
from jobrun.testing.run import HandlerTimedOut, JobResult, run_job, run_job_sync
from jobrun.testing.waiting import eventually, eventually_sync

__all__ = [
    "HandlerTimedOut",
    "JobResult",
    "RecordingProducer",
    "SyncRecordingProducer",
    "eventually",
    "eventually_sync",
    "make_job",
    "run_job",
    "run_job_sync",
]
