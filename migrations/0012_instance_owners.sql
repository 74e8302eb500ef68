-- What owns each instance besides ebb (an Auto Scaling group, an EKS node group, Karpenter,
-- SkyPilot, Batch, a fleet), as `fleet::Owner` derives it from the tags: `{"kind": "asg",
-- "group": "inference"}`, NULL when nothing does. Written with the tags at every sync that
-- finds them changed; the fingerprints are cleared so that the next sync writes it for every
-- listed instance (a row no longer listed keeps NULL).
ALTER TABLE instances ADD COLUMN owner jsonb;
UPDATE instances SET fingerprint = 0 WHERE gone_at IS NULL;
