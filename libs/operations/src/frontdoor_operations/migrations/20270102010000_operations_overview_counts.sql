-- Why: the dashboard overview's counts read 1.45x slower with 10,000 tenants than with one
-- (issue #15 §3, bench/scale.py --full --buffers). Every state change of an operation is a
-- non-HOT update (state is in partial index predicates) that leaves a dead row version and a
-- second index entry; a large table is vacuumed only once 20% of its rows are dead, so the
-- dead versions stay, on pages shared with other tenants' rows. The overview's bitmap scans
-- of operations_recent visited every one of them on every call: 993 buffers for a tenant's
-- 1,000 operations in a 1M-row table, against 37 in a one-tenant database.
--
-- operations_recent_states replaces operations_recent (same keys, same order, so the lists
-- still read it) with the state included: count_by_state and daily_operations become
-- index-only scans, which visit the heap only for pages not yet all-visible and mark dead
-- entries as they pass them, so they are not visited again.
--
-- operations_attention holds only the operations in progress flagged for the admins (few):
-- with it count_stuck reads two short index ranges (flagged; confirmed before the cut-off)
-- instead of every operation in progress of the tenant.
--
-- IF NOT EXISTS: on a large installation build both first with CREATE INDEX CONCURRENTLY (the
-- same definitions) and drop operations_recent CONCURRENTLY; then this migration does nothing
-- (docs/scaling.md).
CREATE INDEX IF NOT EXISTS operations_recent_states ON operations (tenant_id, created_at DESC, id DESC) INCLUDE (state);
DROP INDEX IF EXISTS operations_recent;
CREATE INDEX IF NOT EXISTS operations_attention ON operations (tenant_id)
    WHERE state = 'in_progress' AND attention IS NOT NULL;
