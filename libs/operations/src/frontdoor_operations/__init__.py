"""The operations ledger: operations, immutable revisions, confirmations, outcomes, and the outbox rows their transitions write.

- :mod:`.rules`: the Operations extension's rules as pure functions (``OPS-*``).
- :mod:`.ledger`: storage; every transition a compare-and-set in PostgreSQL with its
  webhook messages in the same transaction.
- :mod:`.kinds`: the tenant's operation kinds.
- :mod:`.perform`: one attempt at the perform webhook and what its answer means.
- :mod:`.settled`: waking a waiting confirm when an outcome is recorded, across processes.
"""
