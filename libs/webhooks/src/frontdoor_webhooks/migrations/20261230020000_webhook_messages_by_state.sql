-- Why: the dashboard overview counts a tenant's retrying and failed messages (state, and
-- created_at within 24 hours or 30 days); with only the primary key's tenant_id prefix it
-- read every message the tenant kept (issue #15 §3: EXPLAIN on a seeded database). IF NOT
-- EXISTS: on a large installation build it first with CREATE INDEX CONCURRENTLY (the same
-- definition), then this migration does nothing (docs/scaling.md).
CREATE INDEX IF NOT EXISTS webhook_messages_by_state ON webhook_messages (tenant_id, state, created_at);
