-- Why: PAP Sessions (§4.2). Every Session starts signed out and lives in PostgreSQL so
-- losing Redis never loses one; Session Tokens are signed JWTs and are not stored, their
-- validity follows the Session's row. Companies' resource servers authenticate to the
-- introspection endpoint with hashed credentials. Agents' feedback (§8) is kept as data.

CREATE TABLE pap_sessions (
    tenant_id      text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id             text NOT NULL,
    client_id      text NOT NULL,
    user_id        text NOT NULL,
    created_at     timestamptz NOT NULL,
    last_used_at   timestamptz NOT NULL,
    ended_at       timestamptz,
    end_reason     text,
    signed_in_at   timestamptz,
    account_id     text,
    scope          text,
    -- the account this Session was ever signed in to: a later sign-in to another
    -- account is account_mismatch, even after signing out (PAP §4.4)
    bound_account  text,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX pap_sessions_by_agent_user ON pap_sessions (tenant_id, client_id, user_id);
CREATE INDEX pap_sessions_recent ON pap_sessions (tenant_id, last_used_at DESC);

CREATE TABLE resource_credentials (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           text NOT NULL,
    name         text NOT NULL,
    prefix       text NOT NULL,
    secret_hash  bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    PRIMARY KEY (tenant_id, id)
);
CREATE UNIQUE INDEX resource_credentials_hash_key ON resource_credentials (secret_hash);

CREATE TABLE feedback (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL,
    session_id text NOT NULL,
    client_id  text NOT NULL,
    user_id    text NOT NULL,
    kind       text NOT NULL,
    body       jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX feedback_recent ON feedback (tenant_id, created_at DESC);
