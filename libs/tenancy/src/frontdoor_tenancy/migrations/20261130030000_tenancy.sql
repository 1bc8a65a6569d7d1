-- Why: the first slice of Frontdoor. A company signs up (tenant + owner admin), proves
-- domains by DNS, configures its issuer, holds ES256 signing keys encrypted at rest,
-- calls the management API with hashed API keys, and every admin action is audited.
-- Every tenant-owned table leads its primary key with tenant_id.

CREATE TABLE tenants (
    id                text PRIMARY KEY,
    slug              text NOT NULL UNIQUE,
    organization_name text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE admins (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    email         text NOT NULL,
    password_hash text NOT NULL,
    role          text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id)
);
-- An email signs in to exactly one tenant (sign-in looks the admin up by email).
CREATE UNIQUE INDEX admins_email_key ON admins (lower(email));

CREATE TABLE admin_sessions (
    tenant_id    text NOT NULL,
    id           text NOT NULL,
    admin_id     text NOT NULL,
    token_hash   bytea NOT NULL,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, admin_id) REFERENCES admins (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX admin_sessions_token_key ON admin_sessions (token_hash);

CREATE TABLE api_keys (
    tenant_id    text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id           text NOT NULL,
    name         text NOT NULL,
    prefix       text NOT NULL,
    key_hash     bytea NOT NULL,
    created_by   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    PRIMARY KEY (tenant_id, id)
);
-- Authentication finds the tenant from the presented key's hash.
CREATE UNIQUE INDEX api_keys_hash_key ON api_keys (key_hash);

CREATE TABLE domains (
    tenant_id         text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id                text NOT NULL,
    domain            text NOT NULL,
    status            text NOT NULL CHECK (status IN ('pending', 'verified', 'suspended', 'failed')),
    challenge_token   text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    verified_at       timestamptz,
    last_checked_at   timestamptz,
    last_seen_at      timestamptz,
    missing_since     timestamptz,
    next_check_at     timestamptz,
    last_check_result text,
    PRIMARY KEY (tenant_id, id),
    UNIQUE (tenant_id, domain)
);
-- A domain is verified for at most one tenant at a time: the database decides races.
CREATE UNIQUE INDEX domains_single_holder ON domains (domain) WHERE status = 'verified';
CREATE INDEX domains_due ON domains (next_check_at) WHERE status <> 'failed';

CREATE TABLE issuer_settings (
    tenant_id  text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    settings   jsonb NOT NULL,
    version    integer NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE signing_keys (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kid             text NOT NULL,
    alg             text NOT NULL DEFAULT 'ES256',
    public_jwk      jsonb NOT NULL,
    private_key_enc bytea NOT NULL,
    created_at      timestamptz NOT NULL,
    activates_at    timestamptz NOT NULL,
    retired_at      timestamptz,
    PRIMARY KEY (tenant_id, kid)
);

CREATE TABLE audit_log (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    actor_type  text NOT NULL CHECK (actor_type IN ('admin', 'api_key', 'system')),
    actor_id    text,
    action      text NOT NULL,
    target_type text,
    target_id   text,
    request_id  text,
    details     jsonb NOT NULL DEFAULT '{}'::jsonb,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX audit_log_recent ON audit_log (tenant_id, at DESC, id DESC);
