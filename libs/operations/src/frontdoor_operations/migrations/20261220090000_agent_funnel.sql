-- The agent funnel (dashboard analytics, issue 19): per tenant, per UTC day, per agent
-- (client_id), counts of what pap_sessions, sign_ins, operations and operation_revisions
-- already record, materialised for closed days behind a per-tenant high-water mark so the
-- page reads a few rows however many Sessions a tenant has. Derived data only: it can be
-- dropped and rebuilt from those tables (delete the marks).
CREATE TABLE agent_funnel_marks (
    tenant_id       text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    counted_through date NOT NULL  -- every day up to and including this one is in agent_funnel_daily
);

CREATE TABLE agent_funnel_daily (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day        date NOT NULL,
    client_id  text NOT NULL,
    sessions   integer NOT NULL DEFAULT 0,
    sign_ins   integer NOT NULL DEFAULT 0,
    proposed   integer NOT NULL DEFAULT 0,
    approved   integer NOT NULL DEFAULT 0,
    performed  integer NOT NULL DEFAULT 0,
    failed     integer NOT NULL DEFAULT 0,
    revised    integer NOT NULL DEFAULT 0,
    reapproved integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, client_id)
);
