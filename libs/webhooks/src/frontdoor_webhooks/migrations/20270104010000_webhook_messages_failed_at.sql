-- Why: every claim of a message (`attempts + 1` and a lease, claims.claim_due and delivery.claim)
-- was a non-HOT update, only because webhook_messages_retrying filtered on `attempts > 0`: each
-- claim wrote a new entry in every one of the table's 9 indexes (bench/README.md, "Where
-- PostgreSQL's CPU per confirm goes"). And that predicate counted a message in its first attempt
-- (claimed, in flight, nothing failed) as retrying on the dashboard's overview. `failed_at` is when
-- the message's latest failed attempt ended: set by a failed attempt's settle (delivery._SETTLE),
-- cleared where a message is queued again with a fresh schedule (redeliver, recover and its jobs,
-- which also reset `attempts`). The retrying index filters on it instead, so no index of the table
-- names a column the claim, the lease renewal (claims.extend_lease) or a hand-back writes
-- (`attempts`, `locked_until`). Nullable without a default: adding it rewrites nothing.
ALTER TABLE webhook_messages ADD COLUMN IF NOT EXISTS failed_at timestamptz;
-- Pending messages that already failed: the end of their latest failed attempt of the current
-- schedule, from the attempt rows (an attempt numbered below the current one, or the current one
-- once it is settled, i.e. no lease is held). Only pending rows are read.
UPDATE webhook_messages AS m SET failed_at = f.ended
  FROM (SELECT p.tenant_id, p.id,
               (SELECT max(a.started_at + a.duration_ms * interval '1 millisecond') FROM webhook_attempts AS a
                 WHERE a.tenant_id = p.tenant_id AND a.message_id = p.id AND a.error_class IS NOT NULL
                   AND (a.attempt < p.attempts OR (a.attempt = p.attempts AND p.locked_until IS NULL))) AS ended
          FROM webhook_messages AS p WHERE p.state = 'pending' AND p.attempts > 0) AS f
 WHERE m.tenant_id = f.tenant_id AND m.id = f.id AND f.ended IS NOT NULL AND m.failed_at IS NULL;
-- IF NOT EXISTS: on a large installation build it first with CREATE INDEX CONCURRENTLY (the same
-- definition; after the column and its backfill), and drop webhook_messages_retrying
-- CONCURRENTLY once the new code runs; then this migration does nothing (docs/scaling.md).
CREATE INDEX IF NOT EXISTS webhook_messages_failed_pending ON webhook_messages (tenant_id)
    WHERE state = 'pending' AND failed_at IS NOT NULL;
DROP INDEX IF EXISTS webhook_messages_retrying;
-- HOT also needs room on the row's page for the new version. A claim writes a version of the same
-- size as the row, and the deliverer claims due messages in batches (up to 256 a pass), which are
-- the rows written one after the other on the same pages: for every row of a page to be claimed in
-- one transaction, before pruning frees the old versions, half the page must be free. Measured
-- (20,000 messages drained through claim_due and DeliveredBatch, 16 or 128 claims a pass, bodies of
-- ~100 and ~700 bytes; bench/README.md): HOT claims per claim 0.02-0.46 at fillfactor 100, 0.29-0.56
-- at 80, 0.47-0.74 at 70, 1.00 at 50; WAL per delivery 1.6 kB at 50 against 2.4-3.9 kB before; and
-- the heap after the drain was smaller at 50 than at 100 (the claims' versions reuse their page
-- once pruned instead of growing the table). It applies to pages written from now on.
ALTER TABLE webhook_messages SET (fillfactor = 50);
