-- Why: session_events become the source of the session.signed_in, session.signed_out,
-- account.revoked and agent.blocked webhooks (issue #6). The dispatcher moves unforwarded
-- rows into webhook messages and sets forwarded_at in the same transaction. `sequence`
-- gives each event its place: taken after the change locked its row (Session, sign-in,
-- agent), so two events about one object are numbered in commit order, which the
-- webhook payloads carry for receivers to ignore stale updates. Rows written before
-- webhooks existed are marked forwarded: nobody could have subscribed to them.

ALTER TABLE session_events DROP CONSTRAINT session_events_type_check;
ALTER TABLE session_events ADD CONSTRAINT session_events_type_check
    CHECK (type IN ('session.signed_in', 'session.signed_out', 'account.revoked', 'agent.blocked'));
ALTER TABLE session_events
    ADD COLUMN sequence bigint GENERATED ALWAYS AS IDENTITY,
    ADD COLUMN forwarded_at timestamptz;
UPDATE session_events SET forwarded_at = created_at;
-- the forwarder's queue
CREATE INDEX session_events_unforwarded ON session_events (sequence) WHERE forwarded_at IS NULL;
