-- The volumes a reclaim's image restores to (size and type, as its block device mappings say),
-- recorded when the image is proven: what the terminated box no longer pays for its disks, and
-- at most what the image stores. `ebb report` counts both.
ALTER TABLE reclaims ADD COLUMN image_volumes jsonb;
