"""One producer of the uniqueness race (tests/integration/test_unique.py).

Connects, says ``ready``, waits for the go file, enqueues a ``sync`` job for
account 7 (with ``unique``: a policy by account, until finished) and prints
the id of the job it got back.
"""

from __future__ import annotations

import os
import sys
import time

from jobrun import SyncClient
from jobrun.domain import NewJob, Unique

url, go = sys.argv[1], sys.argv[2]
policy = Unique(by=["account"]) if "unique" in sys.argv[3:] else None
with SyncClient(database_url=url) as client:
    client.store.depth()  # connect now, so the race is the enqueue, not the connect
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.001)  # released together: each producer watches for the file
    made = client.enqueue(NewJob(type="sync", payload={"account": 7}, unique=policy))
    print(made.id, flush=True)
