-- Why: (1) a disabled endpoint's messages wait, and keep growing while it stays disabled;
-- left in the due index, every relay query walked them only to filter them out by the
-- endpoint's `enabled`. They are now *parked*: `parked` is set on an endpoint's pending
-- messages when it is disabled (and on new messages written for a disabled endpoint),
-- the due index leaves parked rows out, and enabling the endpoint unparks them.
-- (2) The throttle spreads a rate-limited endpoint's backlog by counting its due messages:
-- an index per endpoint over the same rows. (3) Pruning ages a message from when it
-- finished (`finished_at`, set by the delivery engine), not from when it was written, so a
-- message that took days to deliver is still kept for the whole retention after that.
-- Rows finished before this migration have no `finished_at`: they age from `delivered_at`,
-- else `created_at`, as before.

ALTER TABLE webhook_messages
    ADD COLUMN parked boolean NOT NULL DEFAULT false,
    ADD COLUMN finished_at timestamptz;

UPDATE webhook_messages AS m SET parked = true
  FROM webhook_endpoints AS e
 WHERE e.tenant_id = m.tenant_id AND e.id = m.endpoint_id AND NOT e.enabled AND m.state = 'pending';

-- the relay: what is due (parked messages are not)
DROP INDEX webhook_messages_due;
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE state = 'pending' AND NOT parked;
-- the throttle: an endpoint's due backlog
CREATE INDEX webhook_messages_due_by_endpoint ON webhook_messages (endpoint_id, next_attempt_at)
    WHERE state = 'pending' AND NOT parked;
-- prune: finished messages by the time they finished
DROP INDEX webhook_messages_finished;
CREATE INDEX webhook_messages_finished ON webhook_messages ((coalesce(finished_at, delivered_at, created_at)))
    WHERE state <> 'pending';
