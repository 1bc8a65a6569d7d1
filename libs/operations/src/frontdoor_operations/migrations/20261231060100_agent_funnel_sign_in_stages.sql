-- Why: the agent funnel's sign-in stages (issue 19 §3), counted from sign_in_attempts:
-- sign-ins prompted, and attempts abandoned before the login page, at it and at consent.
-- Days rolled up before this migration had no attempts recorded: 0 is their true count.
ALTER TABLE agent_funnel_daily
    ADD COLUMN prompted                integer NOT NULL DEFAULT 0,
    ADD COLUMN abandoned_before_login  integer NOT NULL DEFAULT 0,
    ADD COLUMN abandoned_login         integer NOT NULL DEFAULT 0,
    ADD COLUMN abandoned_consent       integer NOT NULL DEFAULT 0;
