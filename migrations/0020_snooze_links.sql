-- Snooze links (src/snooze.rs, store/snooze.rs): the key that signs the links a notice
-- carries, made once by the first ebb that needs it and shared by every replica, and the links
-- used so far, so that each is used once. The reader role gets no privilege on the key
-- (store/roles.rs): whoever reads it can make links. Deleting its row changes the key on the
-- next notice, and every link given so far stops working.
CREATE TABLE snooze_key (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    seed bytea NOT NULL CHECK (length(seed) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- A used link's row outlives the link (its expiry), then goes: an expired link is refused
-- for its expiry anyway.
CREATE TABLE snooze_links_used (
    id text PRIMARY KEY,
    instance text NOT NULL,
    used_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX snooze_links_used_expires_at ON snooze_links_used (expires_at);
