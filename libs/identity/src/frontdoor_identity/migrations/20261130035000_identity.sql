-- Why: agent identity (PAP §4.1) per tenant. A company decides which personal agents may
-- start Sessions with it: every agent (open, the default) or only those it allowlists,
-- minus those it blocks. Every agent seen at the token endpoint is recorded so the
-- dashboard can list them and block one. Agents' metadata and keys are public documents
-- cached in memory, not here.

CREATE TABLE agent_policies (
    tenant_id  text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    mode       text NOT NULL CHECK (mode IN ('open', 'allowlist')),
    updated_at timestamptz NOT NULL
);

CREATE TABLE agent_allowlist (
    tenant_id text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    client_id text NOT NULL CHECK (length(client_id) <= 2048),
    added_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, client_id)
);

-- One row per agent a tenant has seen or blocked. The blocklist is the rows with
-- blocked_at set: an admin may block a client_id before it ever calls, which makes a row
-- without first/last seen (and unblocking such a row deletes it).
CREATE TABLE agents (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    client_id     text NOT NULL CHECK (length(client_id) <= 2048),
    client_name   text,
    logo_uri      text,
    first_seen_at timestamptz,
    last_seen_at  timestamptz,
    blocked_at    timestamptz,
    PRIMARY KEY (tenant_id, client_id),
    CHECK ((first_seen_at IS NULL) = (last_seen_at IS NULL)),
    CHECK (first_seen_at IS NOT NULL OR blocked_at IS NOT NULL)
);
-- The dashboard lists a tenant's agents most recently seen first (keyset pagination).
CREATE INDEX agents_recent ON agents (tenant_id, (coalesce(last_seen_at, '-infinity'::timestamptz)) DESC, client_id DESC);
