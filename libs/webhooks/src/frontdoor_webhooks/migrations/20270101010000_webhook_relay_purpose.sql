-- Why: the conversation relay (a tenant's own conversation endpoint, issue #16) is a webhook
-- message of its own purpose, written with the agent's message and leased to the ledger in
-- that transaction, so a ledger that dies mid-relay leaves a row the deliverer picks up once
-- the lease ends (ADR 0006, addendum). Its answer is recorded in the attempt's settle.
ALTER TABLE webhook_messages DROP CONSTRAINT webhook_messages_purpose_check;
ALTER TABLE webhook_messages ADD CONSTRAINT webhook_messages_purpose_check
    CHECK (purpose IN ('event', 'perform', 'relay'));
