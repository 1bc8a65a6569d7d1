-- Why: webhooks (issue #6, and the perform webhook of issue #5). A company registers
-- endpoints; each has KEK-encrypted signing secrets (two are valid while a rotation
-- overlaps). webhook_messages is the outbox: a row is written in the transaction of the
-- change it reports, holding the exact body that is signed and sent, so the database and
-- not the broker is the record of delivery. Every try is a webhook_attempts row.
-- Messages are also addressed by ID alone (the relay, pg_notify payloads): IDs are
-- globally unique, and every query after the lookup filters by the row's tenant.

CREATE TABLE webhook_endpoints (
    tenant_id             text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                    text NOT NULL,
    url                   text NOT NULL,
    description           text NOT NULL DEFAULT '',
    event_types           text[] NOT NULL DEFAULT '{}',
    enabled               boolean NOT NULL DEFAULT true,
    disabled_at           timestamptz,
    disabled_reason       text,
    failing_since         timestamptz,
    rate_limit_per_second integer CHECK (rate_limit_per_second IS NULL OR rate_limit_per_second > 0),
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (id)  -- IDs are global; other libraries' tables may reference an endpoint by ID
);
-- enqueue_event: the endpoints of a tenant subscribed to a type
CREATE INDEX webhook_endpoints_event_types ON webhook_endpoints USING gin (event_types);

CREATE TABLE webhook_secrets (
    tenant_id         text NOT NULL,
    id                text NOT NULL,
    endpoint_id       text NOT NULL,
    secret_ciphertext bytea NOT NULL,
    created_at        timestamptz NOT NULL,
    expires_at        timestamptz,  -- NULL: the current secret; else valid until then (rotation overlap)
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_secrets_by_endpoint ON webhook_secrets (tenant_id, endpoint_id);
-- at most one current secret per endpoint
CREATE UNIQUE INDEX webhook_secrets_one_current ON webhook_secrets (tenant_id, endpoint_id) WHERE expires_at IS NULL;

CREATE TABLE webhook_messages (
    tenant_id       text NOT NULL,
    id              text NOT NULL,  -- msg_...: the webhook-id header, the same on every attempt
    endpoint_id     text NOT NULL,
    event_type      text NOT NULL,
    body            text NOT NULL,  -- the exact JSON bytes sent, built once
    purpose         text NOT NULL CHECK (purpose IN ('event', 'perform')),
    operation_id    text,
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'delivered', 'exhausted', 'aborted')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz,
    locked_until    timestamptz,    -- lease of the process sending the current attempt
    created_at      timestamptz NOT NULL,
    delivered_at    timestamptz,
    last_status     integer,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX webhook_messages_id_key ON webhook_messages (id);
-- the relay: what is due
CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE state = 'pending';
-- listing per endpoint, recover
CREATE INDEX webhook_messages_by_endpoint ON webhook_messages (tenant_id, endpoint_id, created_at);
-- the ledger finds the perform messages of an operation
CREATE INDEX webhook_messages_by_operation ON webhook_messages (tenant_id, operation_id) WHERE operation_id IS NOT NULL;
-- prune
CREATE INDEX webhook_messages_finished ON webhook_messages (created_at) WHERE state <> 'pending';

CREATE TABLE webhook_attempts (
    tenant_id        text NOT NULL,
    id               text NOT NULL,
    message_id       text NOT NULL,
    endpoint_id      text NOT NULL,
    attempt          integer NOT NULL,
    url              text NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      integer NOT NULL,
    response_status  integer,
    error_class      text,
    response_excerpt text NOT NULL DEFAULT '',
    request_headers  jsonb NOT NULL,  -- as sent, webhook-signature redacted
    next_attempt_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, message_id) REFERENCES webhook_messages (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_attempts_by_message ON webhook_attempts (tenant_id, message_id, started_at);
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (tenant_id, endpoint_id, started_at);
