-- What an instance keeps paying for while stopped (src/cloud/aws/attached.rs): its EBS volumes
-- (`[{"volume_type": "gp3", "size_gib": 100}]`, from DescribeVolumes) and how many Elastic IPs
-- are associated with it (DescribeAddresses), as last read with the listing. NULL: never read
-- (or every read failed), so `ebb report` says what the stopped box cost is unknown, not zero.
ALTER TABLE instances ADD COLUMN volumes jsonb, ADD COLUMN elastic_ips integer;
