-- Why: issue #13, Frontdoor as an OpenID Shared Signals transmitter (ADR 0005). The sdk
-- keeps Session state in memory while its stream is live, so it must know it has seen
-- every change of its tenant up to a point. session_events gains `stream_seq`: dense
-- per tenant and in commit order, because it is taken from a per-tenant counter row
-- whose lock is held until the event's transaction commits. Two stream-only event
-- types (a Session ended from the dashboard, the agent policy changed) have no webhook
-- in the catalogue yet; they are written already forwarded so the forwarder skips them.
-- ssf_streams holds one row per receiver (an sdk process), bound to the resource-server
-- credential that created it: its acknowledged position, its lease (until when its sdk
-- may answer from memory) and `behind` (a revoke did not get its acknowledgement in time).

ALTER TABLE session_events DROP CONSTRAINT session_events_type_check;
ALTER TABLE session_events ADD CONSTRAINT session_events_type_check
    CHECK (type IN ('session.signed_in', 'session.signed_out', 'account.revoked', 'agent.blocked',
                    'session.ended', 'agent.policy_changed'));
ALTER TABLE session_events ADD COLUMN stream_seq bigint;
CREATE UNIQUE INDEX session_events_stream ON session_events (tenant_id, stream_seq) WHERE stream_seq IS NOT NULL;

CREATE TABLE session_event_counters (
    tenant_id text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    seq       bigint NOT NULL
);

CREATE TABLE ssf_streams (
    tenant_id     text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    id            text NOT NULL,
    credential_id text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    acked_seq     bigint NOT NULL,
    lease_until   timestamptz,
    behind        boolean NOT NULL DEFAULT false,
    last_poll_at  timestamptz,
    PRIMARY KEY (tenant_id, id),
    FOREIGN KEY (tenant_id, credential_id) REFERENCES resource_credentials (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX ssf_streams_leased ON ssf_streams (tenant_id, lease_until) WHERE lease_until IS NOT NULL;
