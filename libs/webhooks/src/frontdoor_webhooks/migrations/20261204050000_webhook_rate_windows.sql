-- Why: endpoints' rate_limit_per_second was counted in Redis; deliveries now run off
-- PostgreSQL alone (ADR 0006), so the count lives here: one row per rate-limited
-- endpoint, a fixed one-second window (the database's clock, shared by every deliverer
-- replica and the ledger's fast path) and how many sends it has let through.
CREATE TABLE webhook_rate_windows (
    endpoint_id  text PRIMARY KEY,
    window_start timestamptz NOT NULL,
    used         integer NOT NULL
);
