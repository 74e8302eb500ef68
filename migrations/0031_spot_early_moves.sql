-- Early moves of a spot migration (a rebalance recommendation, or back to spot after a fall back
-- to on-demand): the replacement being replaced keeps running until the new one is verified,
-- and is terminated only then. Its facts (id, market, type, zone, subnet, price, since when it
-- runs, why it is replaced), so that a new one that does not come up hands the workload back.
ALTER TABLE spot_migrations ADD COLUMN outgoing jsonb;

-- EC2 rebalance recommendations read from EBB_INTERRUPTION_QUEUE, kept only for instances that
-- are a live migration's current replacement: EC2 may reclaim these instances soon.
CREATE TABLE spot_rebalances (
    instance       text PRIMARY KEY,
    recommended_at timestamptz NOT NULL
);
