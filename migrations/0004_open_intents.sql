-- Intents still waiting for their outcome. Every tick looks for them (crash resolution); kept
-- here, finding them costs the number of open intents instead of a pass over every intent ever
-- written. A row is added with its intent and removed with its outcome, in the same
-- transaction (store/audit.rs, append_in).
CREATE TABLE open_intents (
    seq bigint PRIMARY KEY
);

INSERT INTO open_intents (seq)
SELECT a.seq FROM audit_log AS a
WHERE a.outcome = 'intent'
  AND NOT EXISTS (SELECT 1 FROM audit_log AS o WHERE o.intent_seq = a.seq);
