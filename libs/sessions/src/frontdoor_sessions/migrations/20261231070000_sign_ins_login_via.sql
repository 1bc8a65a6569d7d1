-- Why: a Back-Channel Logout token carrying both sub and sid (what most IdPs send) must also
-- end that account's OIDC sign-ins that kept no IdP session (their ID token had no sid, or
-- they were made before 20261231043000), while a sign-in through the signed login handoff
-- or a mediated one is not the IdP's to end. So a sign-in records which login vouched for
-- its account: 'oidc' (the tenant's OpenID Connect connection), 'handoff' (the company's
-- signed login page) or 'mediated' (the company's servers, Mediated Sign-In). NULL: made
-- before this column (origin unknown; a Device or Direct one is treated as possibly OIDC, so
-- that a logout is never missed). No backfill: type = 'mediated' already says the origin of
-- an old mediated sign-in, and idp_session IS NOT NULL an old OIDC one's.
ALTER TABLE sign_ins ADD COLUMN login_via text CHECK (login_via IN ('oidc', 'handoff', 'mediated'));
