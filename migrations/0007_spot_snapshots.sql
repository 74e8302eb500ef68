-- The EBS snapshots of a migration's image (issue 16), recorded when the image is available.
-- Deleting an image is one call per EC2 resource: DeregisterImage, then DeleteSnapshot of each
-- snapshot. After the image is deregistered only this column still knows its snapshots, so a
-- crash between the calls leaves none of them behind untracked: each is deleted, and removed
-- from here, one by one.
ALTER TABLE spot_migrations ADD COLUMN snapshots text[] NOT NULL DEFAULT '{}';
