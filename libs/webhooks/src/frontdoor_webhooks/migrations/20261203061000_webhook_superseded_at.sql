-- Why: a perform message whose operation became final must never be sent again, delivered or
-- not. The `superseded` state only covered messages still pending, exhausted or aborted, so a
-- delivered perform (the company answered 202 and reported later, or answered the outcome)
-- could be redelivered and performed a second time. `superseded_at` marks every message whose
-- subject no longer wants it sent, whatever its state: the state keeps saying what delivery
-- did (a delivered message stays `delivered`), and redelivery and recovery refuse any message
-- with `superseded_at` set. Messages already `superseded` get the time they finished.
ALTER TABLE webhook_messages ADD COLUMN superseded_at timestamptz;

UPDATE webhook_messages SET superseded_at = coalesce(finished_at, created_at) WHERE state = 'superseded';
