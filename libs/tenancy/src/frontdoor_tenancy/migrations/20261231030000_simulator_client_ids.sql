-- Why: the agent simulator (issue #19 §1) must not count in a tenant's agent funnel nor in
-- its metered usage. Every client_id the tenant's simulator has acted under is recorded here
-- before it sends its first request (the console's base URL is part of it, so it may change),
-- and the queries that count usage and the funnel leave those client_ids out. Only Frontdoor
-- can authenticate as these client_ids (the key is in simulator_agents), so no agent can
-- hide its usage by claiming to be the simulator.

CREATE TABLE simulator_client_ids (
    tenant_id      text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    client_id      text NOT NULL,
    registered_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, client_id)
);
