"""Mechanisms shared by every Frontdoor service: settings, database, Redis, logging,
telemetry, IDs, errors, safe outbound HTTP. No domain words live here."""
