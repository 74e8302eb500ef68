-- The instance catalogue (src/fleet/catalogue.rs) as DescribeInstanceTypes last described the
-- accelerated families: refreshed daily by `ebb serve` and `ebb tick` (reconcile/catalogue.rs),
-- read by `ebb advise` from Postgres over the catalogue shipped in the binary. One row per type:
-- the figures are the same in every region that offers it.
CREATE TABLE instance_types (
    instance_type text PRIMARY KEY,
    facts jsonb NOT NULL,
    described_at timestamptz NOT NULL
);
