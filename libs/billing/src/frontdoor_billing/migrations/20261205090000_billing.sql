-- Why: plans and billing (#17). A tenant's billing state is what Stripe last told us, kept
-- with the `created` time of the Stripe event that set each part, so an older event that
-- arrives later never overwrites a newer one. Every Stripe event ID is recorded in the
-- transaction that applies it (a replay changes nothing). Usage is counted from the durable
-- tables by a periodic job into billing_usage_daily (closed UTC days, written once, so
-- pruning never changes a bill) behind a per-tenant high-water mark, and each row is sent to
-- Stripe Billing Meters under a fixed identifier, Stripe's idempotency key for meter events.

CREATE TABLE billing_accounts (
    tenant_id              text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    plan                   text NOT NULL DEFAULT 'free',
    stripe_customer_id     text UNIQUE,
    stripe_subscription_id text,
    subscription_status    text,
    subscription_event_at  timestamptz,  -- created of the newest subscription event applied
    payment_failed_at      timestamptz,  -- set by invoice.payment_failed, cleared by invoice.paid
    grace_until            timestamptz,
    invoice_event_at       timestamptz,  -- created of the newest invoice event applied
    updated_at             timestamptz NOT NULL
);

CREATE TABLE billing_stripe_events (
    id          text PRIMARY KEY,  -- Stripe's evt_...: the same event delivered twice is applied once
    type        text NOT NULL,
    tenant_id   text,
    created     timestamptz NOT NULL,
    received_at timestamptz NOT NULL
);

CREATE TABLE billing_usage_marks (
    tenant_id       text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    counted_through date NOT NULL  -- every day up to and including this one is in billing_usage_daily
);

CREATE TABLE billing_usage_daily (
    tenant_id   text NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    day         date NOT NULL,
    metric      text NOT NULL,
    value       bigint NOT NULL CHECK (value >= 0),
    counted_at  timestamptz NOT NULL,
    report      text NOT NULL DEFAULT 'pending' CHECK (report IN ('pending', 'sent', 'not_billed')),
    reported_at timestamptz,
    PRIMARY KEY (tenant_id, day, metric)
);
CREATE INDEX billing_usage_to_report ON billing_usage_daily (day, tenant_id) WHERE report = 'pending';
