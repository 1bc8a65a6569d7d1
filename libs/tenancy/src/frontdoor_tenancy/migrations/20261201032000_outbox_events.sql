-- Why: tenancy-level changes a company can subscribe to (domain.verified,
-- domain.suspended; issue #6) need an outbox written in the change's own transaction.
-- The webhooks library sits above tenancy, so tenancy cannot write webhook messages:
-- it writes outbox_events, and the dispatcher forwards them (docs/adr/0003-event-outbox.md).
-- `sequence` is taken after the change locked its row, so events about one object are
-- numbered in commit order.

CREATE TABLE outbox_events (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           text NOT NULL,  -- evt_...
    type         text NOT NULL CHECK (type IN ('domain.verified', 'domain.suspended')),
    payload      jsonb NOT NULL,
    sequence     bigint GENERATED ALWAYS AS IDENTITY,
    created_at   timestamptz NOT NULL,
    forwarded_at timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX outbox_events_unforwarded ON outbox_events (sequence) WHERE forwarded_at IS NULL;
