-- Why: the dashboard's Sessions page lists a tenant's live Sessions most recently used first
-- (ORDER BY last_used_at DESC, id DESC LIMIT n). pap_sessions_recent also holds every ended
-- Session, so the page read and sorted all of them; this partial index is the page itself in
-- order (issue #15 §3: EXPLAIN on a seeded database). IF NOT EXISTS: on a large installation
-- build it first with CREATE INDEX CONCURRENTLY, then this migration does nothing.
CREATE INDEX IF NOT EXISTS pap_sessions_live ON pap_sessions (tenant_id, last_used_at DESC, id DESC)
    WHERE ended_at IS NULL;
