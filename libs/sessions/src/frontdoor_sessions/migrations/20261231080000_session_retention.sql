-- Why: Sessions and sign-in attempts are pruned past `session_retention` (issue #15, ADR 0007):
-- the dispatcher's hourly prune reads every tenant's rows by their last activity, oldest first.
-- A Session's last activity is greatest(last_used_at, ended_at) (greatest ignores NULL: a live
-- Session's is its last use); an attempt's is when it ended, coalesce(decided_at, expires_at).
-- Without these the prune's chunks are sequential scans of the two tables.
CREATE INDEX IF NOT EXISTS pap_sessions_last_activity ON pap_sessions ((greatest(last_used_at, ended_at)));
CREATE INDEX IF NOT EXISTS sign_in_attempts_ended ON sign_in_attempts ((coalesce(decided_at, expires_at)));
