-- Why: the rest of the webhook platform (issue #6). (1) Optional Ed25519 signing
-- (Standard Webhooks "v1a"): an endpoint whose signing_scheme is 'v1a' gets an Ed25519
-- key pair beside its HMAC secret; the private half is KEK-encrypted in webhook_secrets
-- like the HMAC secrets (so rotation with an overlap works the same way), the public
-- half (whpk_...) is stored in the clear to be shown. (2) A sequence for the per-object
-- `sequence` of the events this library writes itself (endpoint.disabled,
-- delivery.exhausted, webhook.test). (3) Recovery as a background job with progress.

ALTER TABLE webhook_endpoints
    ADD COLUMN signing_scheme text NOT NULL DEFAULT 'v1' CHECK (signing_scheme IN ('v1', 'v1a'));

ALTER TABLE webhook_secrets
    ADD COLUMN algorithm text NOT NULL DEFAULT 'hmac-sha256' CHECK (algorithm IN ('hmac-sha256', 'ed25519')),
    ADD COLUMN public_key text,  -- whpk_...: the Ed25519 public key (not secret); NULL for HMAC
    ADD CONSTRAINT webhook_secrets_public_key CHECK ((algorithm = 'ed25519') = (public_key IS NOT NULL));
-- at most one current secret per endpoint and algorithm
DROP INDEX webhook_secrets_one_current;
CREATE UNIQUE INDEX webhook_secrets_one_current ON webhook_secrets (tenant_id, endpoint_id, algorithm)
    WHERE expires_at IS NULL;

CREATE SEQUENCE webhook_event_sequence;

CREATE TABLE webhook_recoveries (
    tenant_id    text NOT NULL,
    id           text NOT NULL,  -- whr_...
    endpoint_id  text NOT NULL,
    since        timestamptz NOT NULL,
    until        timestamptz NOT NULL,  -- the request time: messages created later are not part of it
    state        text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done')),
    total        integer,               -- matching messages counted when the job started
    requeued     integer NOT NULL DEFAULT 0,
    cursor_at    timestamptz,           -- (cursor_at, cursor_id): the last message handled,
    cursor_id    text,                  -- in (created_at, id) order
    created_at   timestamptz NOT NULL,
    updated_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
);
-- the worker's queue
CREATE INDEX webhook_recoveries_open ON webhook_recoveries (created_at) WHERE state <> 'done';
