-- Why: an OpenID Connect login connection may authenticate Frontdoor at the IdP's token
-- endpoint with private_key_jwt (RFC 7523, OIDC Core §9) instead of a client secret. Each
-- tenant's signing key is kept here, the private JWK KEK-encrypted (aad: oidc_client_key,
-- tenant) and the public one in clear for {issuer}/oidc/jwks.json, which the admin registers.

CREATE TABLE oidc_client_keys (
    tenant_id      text PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    kid            text NOT NULL,
    key_ciphertext bytea NOT NULL,
    public_jwk     jsonb NOT NULL,
    created_at     timestamptz NOT NULL
);
