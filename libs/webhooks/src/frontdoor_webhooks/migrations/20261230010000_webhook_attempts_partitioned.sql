-- Why: webhook_attempts grows without bound (every try of every message: the largest table
-- at scale, issue #15 §3, docs/scaling.md). It becomes range-partitioned by month on
-- started_at: a month past `webhook_attempts_retention` is dropped whole by the dispatcher's
-- daily partition task (frontdoor_webhooks.attempt_partitions) instead of deleted row by
-- row, and the recent months that every query reads stay small and cached. The columns
-- and index names are unchanged, so every INSERT and SELECT keeps working; the primary key
-- gains started_at (a partitioned table's unique keys must contain its partition key;
-- attempt IDs stay globally unique by construction). Messages pruned within retention still
-- take their attempts with them (the foreign key keeps ON DELETE CASCADE). A DEFAULT
-- partition catches rows of a month whose partition does not exist yet; the task moves
-- them into their month when it creates it.
ALTER TABLE webhook_attempts RENAME TO webhook_attempts_unpartitioned;
ALTER TABLE webhook_attempts_unpartitioned RENAME CONSTRAINT webhook_attempts_pkey TO webhook_attempts_unpartitioned_pkey;
ALTER INDEX webhook_attempts_by_message RENAME TO webhook_attempts_unpartitioned_by_message;
ALTER INDEX webhook_attempts_by_endpoint RENAME TO webhook_attempts_unpartitioned_by_endpoint;

CREATE TABLE webhook_attempts (
    tenant_id        text NOT NULL,
    id               text NOT NULL,
    message_id       text NOT NULL,
    endpoint_id      text NOT NULL,
    attempt          integer NOT NULL,
    url              text NOT NULL,
    started_at       timestamptz NOT NULL,
    duration_ms      integer NOT NULL,
    response_status  integer,
    error_class      text,
    response_excerpt text NOT NULL DEFAULT '',
    request_headers  jsonb NOT NULL,  -- as sent, webhook-signature redacted
    next_attempt_at  timestamptz,
    PRIMARY KEY (tenant_id, id, started_at),
    FOREIGN KEY (tenant_id, message_id) REFERENCES webhook_messages (tenant_id, id) ON DELETE CASCADE
) PARTITION BY RANGE (started_at);
CREATE INDEX webhook_attempts_by_message ON webhook_attempts (tenant_id, message_id, started_at);
CREATE INDEX webhook_attempts_by_endpoint ON webhook_attempts (tenant_id, endpoint_id, started_at);
CREATE TABLE webhook_attempts_default PARTITION OF webhook_attempts DEFAULT;

-- One partition per month from the oldest attempt's month (or this month) to three months
-- ahead; the daily task keeps three months ahead from then on. Named webhook_attempts_pYYYYMM.
DO $$
DECLARE
    month timestamptz := date_trunc('month', least(coalesce((SELECT min(started_at) FROM webhook_attempts_unpartitioned),
                                                            now()), now()) AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    last  timestamptz := date_trunc('month', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '3 months';
BEGIN
    WHILE month <= last LOOP
        EXECUTE format('CREATE TABLE %I PARTITION OF webhook_attempts FOR VALUES FROM (%L) TO (%L)',
                       'webhook_attempts_p' || to_char(month AT TIME ZONE 'UTC', 'YYYYMM'),
                       month, (month AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC');
        month := (month AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
    END LOOP;
END $$;

INSERT INTO webhook_attempts SELECT * FROM webhook_attempts_unpartitioned;
DROP TABLE webhook_attempts_unpartitioned;
ALTER TABLE webhook_attempts RENAME CONSTRAINT webhook_attempts_tenant_id_message_id_fkey1
    TO webhook_attempts_tenant_id_message_id_fkey;
