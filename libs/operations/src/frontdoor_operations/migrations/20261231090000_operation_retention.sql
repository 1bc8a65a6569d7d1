-- Why: final operations are pruned past `operation_retention` (issue #15, ADR 0007 addendum):
-- the dispatcher's hourly prune reads every tenant's final operations by when they finished,
-- oldest first. Every final transition (succeeded, failed, cancelled, expired) sets
-- finished_at. Partial, so proposals and operations in progress (most of the hot rows) are not
-- in it. Without it the prune's chunks are sequential scans of `operations`.
CREATE INDEX IF NOT EXISTS operations_finished ON operations (finished_at)
    WHERE state IN ('succeeded', 'failed', 'cancelled', 'expired');
