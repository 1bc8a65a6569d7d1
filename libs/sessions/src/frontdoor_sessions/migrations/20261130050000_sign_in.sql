-- Why: sign-in and Account Tokens (PAP §4.4-§4.9, ADR 0002). A completed sign-in is a
-- row of sign_ins, the *family* of the Account Tokens it issued (rotations included), so
-- revoking one token revokes the family and signs out every Session it signed in.
-- Account Tokens are opaque; only their SHA-256 is stored. pap_sessions remembers which
-- sign-in signed it in. session_events are written in the same transaction as each
-- change, for the webhook dispatcher to deliver later (an outbox).

CREATE TABLE sign_ins (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    client_id     text NOT NULL,
    user_id       text NOT NULL,
    account_id    text NOT NULL,
    scope         text NOT NULL,
    type          text NOT NULL CHECK (type IN ('device', 'direct', 'mediated')),
    created_at    timestamptz NOT NULL,
    revoked_at    timestamptz,
    revoke_reason text,
    PRIMARY KEY (tenant_id, id)
);
-- disconnect: every live sign-in of an account (optionally of one agent), or of an agent
CREATE INDEX sign_ins_live_by_account ON sign_ins (tenant_id, account_id, client_id) WHERE revoked_at IS NULL;
CREATE INDEX sign_ins_live_by_client ON sign_ins (tenant_id, client_id) WHERE revoked_at IS NULL;

CREATE TABLE account_tokens (
    tenant_id   text NOT NULL,
    id          text NOT NULL,
    sign_in_id  text NOT NULL,
    token_hash  bytea NOT NULL,
    client_id   text NOT NULL,
    user_id     text NOT NULL,
    account_id  text NOT NULL,
    scope       text NOT NULL,
    created_at  timestamptz NOT NULL,
    replaced_at timestamptz,
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, sign_in_id) REFERENCES sign_ins (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX account_tokens_hash_key ON account_tokens (token_hash);
CREATE INDEX account_tokens_by_sign_in ON account_tokens (tenant_id, sign_in_id);

ALTER TABLE pap_sessions ADD COLUMN sign_in_id text;
CREATE INDEX pap_sessions_by_sign_in ON pap_sessions (tenant_id, sign_in_id) WHERE sign_in_id IS NOT NULL;

CREATE TABLE session_events (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL,
    type       text NOT NULL CHECK (type IN ('session.signed_in', 'session.signed_out', 'account.revoked')),
    payload    jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX session_events_recent ON session_events (tenant_id, created_at, id);
