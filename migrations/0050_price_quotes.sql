-- The prices the clouds quote (Alibaba's DescribePrice, Tencent's
-- DescribeZoneInstanceConfigInfos): refreshed daily by `ebb serve` and `ebb tick`
-- (reconcile/quotes.rs) for the types the fleet runs, read by `ebb report`, `/savings` and
-- `ebb advise` over the price table (fleet/quotes.rs). One row per region and type; a failed
-- read keeps the last good one.
CREATE TABLE price_quotes (
    region text NOT NULL,
    instance_type text NOT NULL,
    currency text NOT NULL,
    hourly double precision,
    monthly jsonb NOT NULL,
    source text NOT NULL,
    quoted_at timestamptz NOT NULL,
    PRIMARY KEY (region, instance_type)
);
