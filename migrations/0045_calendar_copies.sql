-- The last good copy of what each calendar address (a calendar's `url` in the policy files)
-- served: fetched by `ebb serve` at start and daily (serve/calendar_fetcher.rs), replaced only
-- by a fetch that reads whole in the calendar's format and names every year the copy named,
-- and read at start, so that a replica that cannot reach the address keeps the dates.
CREATE TABLE calendar_copies (
    url text PRIMARY KEY,
    body text NOT NULL,
    fetched_at timestamptz NOT NULL
);
