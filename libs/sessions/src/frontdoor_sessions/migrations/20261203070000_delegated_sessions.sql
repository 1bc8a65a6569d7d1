-- PAP 1.0 (ADR 0004 §5): the agent names its Session (sid) and signs every request, so
-- 1.0 Sessions are keyed by (tenant, client_id, agent_sid) and get an internal ses_ ID at
-- first sight, in the same table as 0.2 Sessions (dashboard, blocking and events treat
-- both alike). 1.0 sign-ins are independent of Session identity: they have no User ID.
ALTER TABLE pap_sessions
    ADD COLUMN profile   text NOT NULL DEFAULT '0.2' CHECK (profile IN ('0.2', '1.0')),
    ADD COLUMN agent_sid text,
    ADD COLUMN agent_id  text,
    ADD CONSTRAINT pap_sessions_delegated_sid CHECK (profile = '0.2' OR agent_sid IS NOT NULL);
CREATE UNIQUE INDEX pap_sessions_delegated_key ON pap_sessions (tenant_id, client_id, agent_sid)
    WHERE profile = '1.0';

ALTER TABLE sign_ins
    ADD COLUMN profile text NOT NULL DEFAULT '0.2' CHECK (profile IN ('0.2', '1.0')),
    ALTER COLUMN user_id DROP NOT NULL,
    ADD CONSTRAINT sign_ins_user_of_0_2 CHECK (profile = '1.0' OR user_id IS NOT NULL);

ALTER TABLE account_tokens ALTER COLUMN user_id DROP NOT NULL;
