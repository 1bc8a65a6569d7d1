-- Why: forwarded session_events are deleted once older than the webhook retention
-- (the dispatcher's hourly outbox prune, in chunks). This index lets each chunk find the
-- oldest forwarded rows without scanning the table; unforwarded rows are not in it.

CREATE INDEX session_events_forwarded ON session_events (forwarded_at) WHERE forwarded_at IS NOT NULL;
