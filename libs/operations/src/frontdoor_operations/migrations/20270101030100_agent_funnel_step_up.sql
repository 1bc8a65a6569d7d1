-- Why: the agent funnel's sign-ins abandoned at a step-up (issue 19 §3), counted from
-- sign_in_attempts.step_up, apart from those abandoned at consent. Days rolled up before this
-- migration had no step-up recorded: their step-ups stay in abandoned_consent, 0 here.
ALTER TABLE agent_funnel_daily ADD COLUMN abandoned_step_up integer NOT NULL DEFAULT 0;
