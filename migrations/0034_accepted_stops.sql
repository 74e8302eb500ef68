-- A stop the cloud accepted whose instance had not stopped yet when read back: Alibaba Cloud
-- and Tencent Cloud say how a stopped instance is billed only once it has stopped. Its intent
-- stays open, with what its outcome row will say, until a listing shows the instance stopped
-- (src/reconcile/stopping.rs); kept here, not in memory, so that after a restart or under a
-- new leader the stop is still known to be ebb's and accepted.
ALTER TABLE open_intents
    ADD COLUMN accepted_reason text,
    ADD COLUMN accepted_request_id text;
