-- Why: the private_key_jwt client key of an OpenID Connect login connection rotates like the
-- issuer's signing keys: a new key is published at {issuer}/oidc/jwks.json first and signs
-- client assertions only from activates_at (the publish lead, so an IdP that cached the JWKS
-- can learn it); the key it replaces keeps signing until then and stays published until
-- previous_retired_at plus a retention covering its last assertions. One row per tenant
-- still (the KEK re-encryption walk is per tenant): the newest key and the one before it.
-- Both private halves are KEK blobs under the same associated data (oidc_client_key, tenant),
-- so a rotation moves the blob between columns without opening it.
ALTER TABLE oidc_client_keys
    ADD COLUMN activates_at        timestamptz,
    ADD COLUMN previous_kid        text,
    ADD COLUMN previous_ciphertext bytea,
    ADD COLUMN previous_public_jwk jsonb,
    ADD COLUMN previous_retired_at timestamptz;
UPDATE oidc_client_keys SET activates_at = created_at;
ALTER TABLE oidc_client_keys ALTER COLUMN activates_at SET NOT NULL;
ALTER TABLE oidc_client_keys ADD CONSTRAINT oidc_client_keys_previous_whole CHECK (
    (previous_kid IS NULL) = (previous_ciphertext IS NULL)
    AND (previous_kid IS NULL) = (previous_public_jwk IS NULL)
    AND (previous_kid IS NULL) = (previous_retired_at IS NULL));
