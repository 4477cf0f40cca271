-- 0001: accounts and users.
BEGIN;

CREATE TABLE accounts (
    id                   BIGSERIAL PRIMARY KEY,
    name                 VARCHAR(200) NOT NULL,
    plan_code            VARCHAR(32)  NOT NULL DEFAULT 'starter',
    country              CHAR(2)      NOT NULL,
    vat_id               VARCHAR(32),
    gateway_customer_id  VARCHAR(64),
    created_at           TIMESTAMPTZ  NOT NULL DEFAULT now()
);

CREATE TABLE users (
    id                 BIGSERIAL PRIMARY KEY,
    account_id         BIGINT       NOT NULL REFERENCES accounts (id),
    email              VARCHAR(320) NOT NULL,
    password_hash      VARCHAR(255) NOT NULL,
    role               VARCHAR(16)  NOT NULL DEFAULT 'member'
                       CHECK (role IN ('owner', 'admin', 'member')),
    email_verified_at  TIMESTAMPTZ,
    created_at         TIMESTAMPTZ  NOT NULL DEFAULT now(),
    deleted_at         TIMESTAMPTZ
);

-- Case-insensitive uniqueness, only among users that are not soft-deleted,
-- so a deleted user's address can sign up again.
CREATE UNIQUE INDEX users_email_lower_uniq ON users (lower(email)) WHERE deleted_at IS NULL;
CREATE INDEX users_account_id_idx ON users (account_id);

COMMIT;
