-- Queries on worker_offers (migration 00009): the free slots idle workers
-- offer to single enqueues for handoff. Offers are written by the claim
-- (JobClaim rewrites its owner's offers) and taken by the enqueue
-- (JobInsertNotify); what is left here is for a worker that stops.

-- name: WorkerOffersWithdraw :execrows
-- Withdraw every offer of the owner: a stopping worker takes no more handoffs.
DELETE FROM worker_offers WHERE owner = @owner::text;

-- name: WorkerOffersList :many
-- The offers standing now, for operators and tests: who offers how many slots
-- of which queue, and until when.
SELECT owner, queue, channel, slots, lease, expires_at
FROM worker_offers
ORDER BY queue, owner;
