-- 0003: refresh tokens (hashed) and webhook de-duplication.
BEGIN;

CREATE TABLE refresh_tokens (
    id            BIGSERIAL PRIMARY KEY,
    user_id       BIGINT      NOT NULL REFERENCES users (id),
    family_id     UUID        NOT NULL,
    token_sha256  CHAR(64)    NOT NULL UNIQUE,
    expires_at    TIMESTAMPTZ NOT NULL,
    revoked_at    TIMESTAMPTZ
);

CREATE INDEX refresh_tokens_family_idx ON refresh_tokens (family_id);
-- The nightly cleanup deletes rows past expires_at; this keeps it an index scan.
CREATE INDEX refresh_tokens_expires_idx ON refresh_tokens (expires_at);

CREATE TABLE processed_events (
    event_id     VARCHAR(64) PRIMARY KEY,
    received_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

COMMIT;
