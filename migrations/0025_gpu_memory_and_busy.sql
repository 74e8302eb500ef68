-- Beside each five-minute GPU reading, the GPU memory used (MiB, on the GPU that held the most)
-- and how many of the instance's GPUs were busy, in the same twelve slots as `percent`. NULL
-- (the whole array, or a slot) where the source did not say: rows kept before this migration,
-- a CloudWatch agent that does not publish the memory, a source with neither.
ALTER TABLE gpu_readings
    ADD COLUMN memory_mib integer[] CHECK (cardinality(memory_mib) = 12),
    ADD COLUMN gpus_busy smallint[] CHECK (cardinality(gpus_busy) = 12);
