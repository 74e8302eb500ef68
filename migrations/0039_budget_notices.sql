-- The thresholds of each budget (`budgets` in the policy files) whose notice went out, once
-- per period: a row per budget, `per` value ('' without one), period, threshold and whether
-- the forecast (not the spend) crossed it, written in the transaction that appends the
-- notice's audit row, so that a notice is sent once however many ticks see the threshold
-- crossed, and again in the next period.
CREATE TABLE budget_notices (
    budget text NOT NULL,
    key text NOT NULL,
    period_start timestamptz NOT NULL,
    threshold double precision NOT NULL,
    by_forecast boolean NOT NULL,
    sent_at timestamptz NOT NULL,
    PRIMARY KEY (budget, key, period_start, threshold, by_forecast)
);
