-- Why: the dashboard's team (issue 7). Admins invite members by email with a role; an
-- invitation is a one-time token (only its SHA-256 is stored) that expires, and accepting
-- it sets the member's password. Management API keys act with a role too, so a key can be
-- read-only. Roles are already per membership (admins.role); every admin created before
-- this migration was created by sign-up as 'owner', so no role is rewritten here.

-- A key acts as 'admin' unless its owner chose otherwise. Keys made before roles existed
-- could create and revoke keys (they acted for the signing-up owner): they keep that power
-- as 'owner' rather than break the automation that holds them.
ALTER TABLE api_keys ADD COLUMN role text NOT NULL DEFAULT 'admin'
    CHECK (role IN ('owner', 'admin', 'viewer'));
UPDATE api_keys SET role = 'owner';

CREATE TABLE admin_invites (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id          text NOT NULL,
    email       text NOT NULL,
    role        text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
    token_hash  bytea NOT NULL,
    invited_by  text,
    created_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    accepted_at timestamptz,
    revoked_at  timestamptz,
    PRIMARY KEY (tenant_id, id)
);
-- Accepting finds the invitation from the presented token's hash.
CREATE UNIQUE INDEX admin_invites_token_key ON admin_invites (token_hash);
-- At most one open invitation per email and tenant: inviting again replaces it.
CREATE INDEX admin_invites_open ON admin_invites (tenant_id, lower(email))
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
