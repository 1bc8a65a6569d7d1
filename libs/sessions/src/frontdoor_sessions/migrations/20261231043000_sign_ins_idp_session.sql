-- Why: OpenID Connect Back-Channel Logout 1.0 (§2.6, §2.7) lets the company's IdP end one of
-- its sessions with a logout token that names the session (sid), with or without the user
-- (sub). A sign-in completed through an oidc login connection whose ID token carried a sid
-- keeps it here as idp_session: SHA-256 (hex) of the IdP's issuer and the sid
-- (frontdoor_sessions.oidc_id_token.idp_session_hash), NULL otherwise, so that such a token
-- revokes exactly the sign-ins that IdP session made, in that tenant only.
ALTER TABLE sign_ins ADD COLUMN idp_session text;
CREATE INDEX sign_ins_live_by_idp_session ON sign_ins (tenant_id, idp_session)
    WHERE idp_session IS NOT NULL AND revoked_at IS NULL;
