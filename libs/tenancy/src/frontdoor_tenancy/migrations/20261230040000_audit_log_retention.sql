-- Why: the audit log is pruned past `audit_retention` (issue #15 §3), oldest first in chunks,
-- across every tenant: that needs the rows by time alone (audit_log_recent leads with the
-- tenant). IF NOT EXISTS: on a large installation build it first with CREATE INDEX
-- CONCURRENTLY, then this migration does nothing.
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (at);
