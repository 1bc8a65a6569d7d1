-- Why: before `webhook_messages.superseded_at` existed, a final operation's perform message
-- that had been delivered was left resendable (a redelivery would perform it again). Every
-- perform message of an operation already final is marked superseded now, as the ledger
-- marks it from now on in the transaction that makes the operation final.
UPDATE webhook_messages AS m SET superseded_at = coalesce(o.finished_at, o.updated_at)
  FROM operations AS o
 WHERE o.tenant_id = m.tenant_id AND o.perform_message_id = m.id
   AND o.state IN ('succeeded', 'failed', 'cancelled', 'expired') AND m.superseded_at IS NULL;
