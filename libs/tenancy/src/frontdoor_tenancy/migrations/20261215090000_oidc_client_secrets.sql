-- Why: a tenant's login connection may be OpenID Connect (its own identity provider signs
-- its users in). The client secret Frontdoor presents to the IdP's token endpoint must be
-- read back, so it is stored here KEK-encrypted (aad: oidc_client_secret, tenant), apart
-- from the issuer settings, which the management API returns whole: the secret never is.

CREATE TABLE oidc_client_secrets (
    tenant_id         text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    secret_ciphertext bytea NOT NULL,
    updated_at        timestamptz NOT NULL
);
