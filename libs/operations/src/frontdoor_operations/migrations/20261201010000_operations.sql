-- Why: the operations ledger (PAP Operations extension v1). Anything with consequences an
-- agent asks a company for is an operation: proposed with immutable revisions, confirmed at
-- most once by a compare-and-set on `state`, performed through the company's webhook, and
-- final with a result. Every row is tenant-scoped; every query filters by tenant_id.

-- What a tenant lets agents do: the scopes a confirm needs, expiry bounds, and which
-- webhook endpoint performs it (and, optionally, which one re-prices it at confirm time).
CREATE TABLE operation_kinds (
    tenant_id              text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name                   text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_.:-]{0,63}$'),
    description            text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    scopes                 text[] NOT NULL DEFAULT '{}',
    default_expiry_seconds integer NOT NULL CHECK (default_expiry_seconds BETWEEN 30 AND 2592000),
    max_expiry_seconds     integer NOT NULL CHECK (max_expiry_seconds BETWEEN 30 AND 2592000),
    perform_endpoint_id    text NOT NULL,
    reprice_endpoint_id    text,
    created_at             timestamptz NOT NULL,
    updated_at             timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, name),
    -- Tenant-scoped references: a kind can only name its own tenant's endpoints.
    FOREIGN KEY (tenant_id, perform_endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE RESTRICT,
    FOREIGN KEY (tenant_id, reprice_endpoint_id) REFERENCES webhook_endpoints (tenant_id, id)
        ON DELETE SET NULL (reprice_endpoint_id),
    CHECK (default_expiry_seconds <= max_expiry_seconds)
);

CREATE TABLE operations (
    id                   text PRIMARY KEY,
    tenant_id            text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind                 text NOT NULL,
    -- The owner: the agent and its pairwise user, and the account when proposed signed in.
    client_id            text NOT NULL,
    user_id              text NOT NULL,
    account_id           text,
    session_id           text NOT NULL,
    state                text NOT NULL CHECK (state IN ('proposed', 'in_progress', 'succeeded', 'failed',
                                                        'cancelled', 'expired')),
    revision             integer NOT NULL CHECK (revision >= 1),
    action_key           text CHECK (length(action_key) <= 200),
    scopes               text[] NOT NULL DEFAULT '{}',
    input                jsonb,
    url                  text,
    expires_at           timestamptz NOT NULL,
    confirmed_revision   integer,
    approved_by          text CHECK (approved_by IN ('user', 'standing_permission')),
    confirmed_at         timestamptz,
    confirmed_via        text CHECK (confirmed_via IN ('agent', 'website')),
    perform_message_id   text,
    result               jsonb,
    finished_at          timestamptz,
    -- Set when the company must look: retries exhausted with the outcome still unknown.
    attention            text,
    -- Bumped by every change; webhook payloads carry it so receivers can drop stale updates.
    sequence             integer NOT NULL DEFAULT 1,
    created_at           timestamptz NOT NULL,
    updated_at           timestamptz NOT NULL,
    FOREIGN KEY (tenant_id, kind) REFERENCES operation_kinds (tenant_id, name) ON DELETE RESTRICT,
    CHECK (state <> 'proposed' OR confirmed_at IS NULL),
    CHECK (state NOT IN ('in_progress', 'succeeded', 'failed') OR confirmed_at IS NOT NULL),
    CHECK (state NOT IN ('succeeded', 'failed', 'cancelled', 'expired') OR result IS NOT NULL),
    CHECK (confirmed_revision IS NULL OR confirmed_revision = revision)
);
-- OPS-4-01: one open operation per action for the same agent, user and account.
CREATE UNIQUE INDEX operations_open_action ON operations
    (tenant_id, client_id, user_id, (coalesce(account_id, '')), action_key)
    WHERE action_key IS NOT NULL AND state IN ('proposed', 'in_progress');
-- The company's list, newest first (keyset pagination), and its filters.
CREATE INDEX operations_recent ON operations (tenant_id, created_at DESC, id DESC);
CREATE INDEX operations_by_account ON operations (tenant_id, account_id, created_at DESC) WHERE account_id IS NOT NULL;
-- The expiry sweep and the "stuck in progress" view.
CREATE INDEX operations_expiring ON operations (expires_at) WHERE state = 'proposed';
CREATE INDEX operations_in_progress ON operations (tenant_id, confirmed_at) WHERE state = 'in_progress';

-- OPS-3.1-01: a revision never changes once issued; a revise inserts the next one.
CREATE TABLE operation_revisions (
    operation_id           text NOT NULL REFERENCES operations (id) ON DELETE CASCADE,
    tenant_id              text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    revision               integer NOT NULL CHECK (revision >= 1),
    summary                text NOT NULL CHECK (length(summary) BETWEEN 1 AND 2000),
    terms                  jsonb,
    user_approval_required boolean NOT NULL,
    expires_at             timestamptz NOT NULL,
    created_at             timestamptz NOT NULL,
    PRIMARY KEY (operation_id, revision)
);
