-- +goose Up

-- Server-side admin sessions (the /admin dashboard's cookie). The cookie
-- holds a random session id and this table its SHA-256, so signing out
-- (revoked_at) ends the session at once on every instance, and a reader of
-- this table learns no cookie. Revoking or demoting the API key ends its
-- sessions too (the lookup joins the live key). Rows are deleted a day after
-- they expire, by the next sign-in.
CREATE TABLE admin_sessions (
    id_hash     bytea PRIMARY KEY CHECK (octet_length(id_hash) = 32),
    api_key_id  bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);
CREATE INDEX admin_sessions_expires_idx ON admin_sessions (expires_at);
CREATE INDEX admin_sessions_api_key_idx ON admin_sessions (api_key_id);

-- +goose Down
DROP TABLE admin_sessions;
