-- Raises of a budget's amount people made (`ebb budgets raise`, `POST /v1/budgets/{name}/raises`):
-- a decision on record, with who, why and until when; never deleted, so the audit log's rows
-- about them can always be read against them. Exactly one of percent and amount is set.
CREATE TABLE budget_raises (
    id bigserial PRIMARY KEY,
    budget text NOT NULL,
    -- The value of the budget's `per` tag raised; '' for every value.
    key text NOT NULL,
    percent double precision,
    amount double precision,
    made_at timestamptz NOT NULL,
    until timestamptz NOT NULL,
    made_by text NOT NULL,
    reason text NOT NULL,
    CHECK ((percent IS NULL) <> (amount IS NULL)),
    CHECK (until > made_at)
);
CREATE INDEX budget_raises_until ON budget_raises (until);
