-- Why: the agent funnel (issue 19 §3) counts sign-ins prompted and where they were abandoned
-- (before the login page, at it, at consent). A Device or Direct Sign-In in progress lives in
-- Redis (the device code, the browser's flow) and leaves nothing behind when it expires or is
-- denied, and sign_ins only records the ones completed: this is the one durable record of each
-- attempt, a timestamp per stage it reached. Written by the issuer as the flow moves (no
-- secret: a Device attempt's id is derived from the device handle, never the device code).
-- Completion stays sign_ins' fact; an attempt only says how far the user got.
CREATE TABLE sign_in_attempts (
    tenant_id  text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id         text NOT NULL,
    client_id  text NOT NULL,
    type       text NOT NULL CHECK (type IN ('device', 'direct')),
    created_at timestamptz NOT NULL,  -- prompted: a device authorization, an authorize request accepted
    expires_at timestamptz NOT NULL,  -- when it can no longer go on; undecided by then = abandoned
    login_at   timestamptz,           -- the browser was sent to the company's login page (or its IdP)
    consent_at timestamptz,           -- the login vouched for an account; the consent page is next
    decided_at timestamptz,           -- allowed or denied (at consent, or by the IdP at its login)
    allowed    boolean,
    PRIMARY KEY (tenant_id, id)
);
CREATE INDEX sign_in_attempts_by_created ON sign_in_attempts (tenant_id, created_at);
-- the funnel counts an abandoned attempt on the day it ended: denied, or expired undecided
CREATE INDEX sign_in_attempts_abandoned ON sign_in_attempts (tenant_id, (coalesce(decided_at, expires_at)))
    WHERE allowed IS NOT TRUE;
