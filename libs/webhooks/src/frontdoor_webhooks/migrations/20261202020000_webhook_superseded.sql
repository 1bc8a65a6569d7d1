-- Why: a perform message whose operation became final (the company reported its outcome,
-- or it was cancelled or expired) must never be sent again: not by a pending retry, not by a
-- redelivery, not by a recovery job. `superseded` is that terminal state: unlike `aborted`
-- and `exhausted`, nothing re-queues it.
ALTER TABLE webhook_messages DROP CONSTRAINT webhook_messages_state_check;
ALTER TABLE webhook_messages ADD CONSTRAINT webhook_messages_state_check
    CHECK (state IN ('pending', 'delivered', 'exhausted', 'aborted', 'superseded'));
