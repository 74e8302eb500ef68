-- Console logins (store/sessions.rs): the browser's cookie holds a random session id; this
-- table holds only its SHA-256 and a hash binding it to the API token it was made with (which
-- cannot be checked against a guessed token without the id), until it expires or the browser
-- logs out. The reader role gets no privilege on it (store/roles.rs).
CREATE TABLE console_sessions (
    id_hash bytea PRIMARY KEY,
    token_binding bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX console_sessions_expires_at ON console_sessions (expires_at);
