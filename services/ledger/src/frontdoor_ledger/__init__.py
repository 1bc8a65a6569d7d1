"""The operations endpoint agents use and the ledger API companies use."""
