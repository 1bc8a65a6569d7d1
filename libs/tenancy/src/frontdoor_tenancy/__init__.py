"""Tenants, admins, domains and DNS verification, issuer settings, signing keys, API keys, audit log."""
