-- Why: the agent funnel (issue 19 §3) shows where sign-ins are abandoned, step-up among them.
-- A step-up is an agent asking a user it already holds a sign-in for to sign in again for more
-- (PAP §4.4: a wider scope takes a new sign-in, whose Account Token replaces the old one). The
-- attempt learns the account only when the login vouches for it, and whether the agent held a
-- live sign-in of that account then is a fact of that moment (the sign-in may be revoked later):
-- recorded once, with consent_at, from sign_ins. NULL until consent is reached (and for the
-- attempts recorded before this column: they cannot be told apart now).
ALTER TABLE sign_in_attempts ADD COLUMN step_up boolean;
