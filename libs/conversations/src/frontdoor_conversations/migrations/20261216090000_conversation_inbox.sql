-- Why: the dashboard's human handoff inbox (#16). A conversation handed to a person can be
-- assigned to one team member; each member chooses the display name agents see when they
-- answer (`responder_name`, `sender_name`), so no admin's sign-in email ever reaches an
-- agent. Every row is tenant-scoped; every query filters by tenant_id. Removing a member
-- removes their assignments and name.

CREATE TABLE conversation_assignments (
    tenant_id       text NOT NULL,
    conversation_id text NOT NULL,
    admin_id        text NOT NULL,
    assigned_by     text,
    assigned_at     timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, conversation_id),
    FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE,
    FOREIGN KEY (tenant_id, admin_id) REFERENCES admins (tenant_id, id) ON DELETE CASCADE
);

-- "Assigned to me".
CREATE INDEX conversation_assignments_admin ON conversation_assignments (tenant_id, admin_id);

CREATE TABLE conversation_responder_names (
    tenant_id    text NOT NULL,
    admin_id     text NOT NULL,
    display_name text NOT NULL CHECK (length(display_name) BETWEEN 1 AND 60),
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, admin_id),
    FOREIGN KEY (tenant_id, admin_id) REFERENCES admins (tenant_id, id) ON DELETE CASCADE
);

-- Sessions' pages list their conversations.
CREATE INDEX conversations_session ON conversations (tenant_id, session_id, created_at);
