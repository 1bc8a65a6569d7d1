"""Per-tenant PAP authorization server."""
