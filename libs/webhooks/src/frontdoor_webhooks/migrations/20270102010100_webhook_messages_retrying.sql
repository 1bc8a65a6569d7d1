-- Why: the dashboard overview's "retrying" count (messages still pending after a failed
-- attempt, frontdoor_operations.overview.delivery_health) read every pending message of the
-- tenant through webhook_messages_by_state and checked attempts and delivered_at on the heap:
-- during a backlog, or with perform messages waiting (bench/scale.py --buffers: 443 buffers for
-- 4,000 waiting messages), the overview did work in proportion to the queue. Partial: a message
-- enters it only when an attempt fails while it is pending, so deliveries that succeed first
-- time never write it; the count becomes an index-only scan of the retrying messages alone.
-- IF NOT EXISTS: on a large installation build it first with CREATE INDEX CONCURRENTLY (the same
-- definition), then this migration does nothing (docs/scaling.md).
CREATE INDEX IF NOT EXISTS webhook_messages_retrying ON webhook_messages (tenant_id)
    WHERE state = 'pending' AND attempts > 0 AND delivered_at IS NULL;
