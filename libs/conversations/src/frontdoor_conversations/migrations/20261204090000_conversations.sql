-- Why: hosted conversations (PAP §7). A tenant's company agent talks with personal agents
-- through Frontdoor: each conversation belongs to one agent and pairwise user (and, once
-- used signed in, one account); its events form one ordered log per conversation, read by
-- opaque cursors. Retention forgets old events but keeps their IDs as tombstones, so a
-- cursor that pointed at one is answered `cursor_expired`, not `invalid_cursor` (§7.5).
-- Every row is tenant-scoped; every query filters by tenant_id.

CREATE TABLE conversations (
    tenant_id       text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id              text NOT NULL,
    client_id       text NOT NULL,
    user_id         text NOT NULL,
    account_id      text,
    session_id      text NOT NULL,
    parent_id       text,
    direct_child_id text,
    status          text NOT NULL CHECK (status IN ('working', 'idle', 'queued', 'closed')),
    responder       text NOT NULL CHECK (responder IN ('agent', 'human')),
    last_seq        bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, parent_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
);

-- The company's inbox: a tenant's conversations by status, newest change first.
CREATE INDEX conversations_inbox ON conversations (tenant_id, status, updated_at DESC);

CREATE TABLE conversation_events (
    tenant_id       text NOT NULL,
    conversation_id text NOT NULL,
    seq             bigint NOT NULL CHECK (seq >= 1),
    id              text NOT NULL,
    type            text NOT NULL,
    -- NULL once retention forgot the event: the row stays as the tombstone of its cursor.
    payload         jsonb,
    created_at      timestamptz NOT NULL,
    forgotten_at    timestamptz,
    PRIMARY KEY (tenant_id, conversation_id, seq),
    UNIQUE (tenant_id, conversation_id, id),
    FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE,
    CHECK ((payload IS NULL) = (forgotten_at IS NOT NULL))
);

CREATE INDEX conversation_events_retention ON conversation_events (tenant_id, created_at) WHERE payload IS NOT NULL;

-- Message IDs, once each: a user's (PAP-7.3-01, unique per agent and pairwise user) and the
-- company's (unique per conversation). `digest` tells a retry from a reused ID.
CREATE TABLE conversation_message_ids (
    tenant_id       text NOT NULL,
    scope           text NOT NULL,
    message_id      text NOT NULL,
    conversation_id text NOT NULL,
    digest          text NOT NULL,
    created_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, scope, message_id),
    -- Deferred: a start claims its message ID before it writes the conversation.
    FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
        DEFERRABLE INITIALLY DEFERRED
);
