-- Why: the dashboard's agent simulator (issue #19 §1) is a real personal agent with its own
-- Client ID Metadata Document and keys hosted by Frontdoor, one identity per tenant. Its
-- private signing key is generated once and stored KEK-encrypted
-- (aad: simulator_agent_key, tenant, kid); only the public key is ever served.

CREATE TABLE simulator_agents (
    tenant_id       text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    kid             text NOT NULL,
    key_ciphertext  bytea NOT NULL,
    created_at      timestamptz NOT NULL
);
