-- Why: the agent simulator's runs are kept (issue #19 §1, run history): which member ran it
-- and when, and each step's name, outcome, finding codes and timings, so a team can see what
-- changed between two runs. Only what the page may show is stored: no request or response
-- headers or bodies, no token, assertion, proof or key (the live page shows those redacted).

CREATE TABLE simulator_runs (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,          -- sim_...
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz NOT NULL,
    member_id     text NOT NULL,          -- admins.id of who ran it (kept if the member leaves)
    member_email  text NOT NULL,          -- as it was when they ran it
    ok            boolean NOT NULL,       -- every step that ran passed
    steps         jsonb NOT NULL,         -- [{key, title, status, summary, duration_ms, findings, exchanges}]
    PRIMARY KEY (tenant_id, id)
);

-- The simulator page lists a tenant's latest runs.
CREATE INDEX simulator_runs_latest ON simulator_runs (tenant_id, started_at DESC);
