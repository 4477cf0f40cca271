-- 0002: invoices and their lines.
BEGIN;

CREATE TABLE invoices (
    id           BIGSERIAL PRIMARY KEY,
    account_id   BIGINT        NOT NULL REFERENCES accounts (id),
    number       VARCHAR(20)   UNIQUE,
    status       VARCHAR(16)   NOT NULL DEFAULT 'draft'
                 CHECK (status IN ('draft', 'open', 'paid', 'void', 'uncollectible')),
    currency     CHAR(3)       NOT NULL,
    subtotal     NUMERIC(12,2) NOT NULL,
    tax          NUMERIC(12,2) NOT NULL,
    total        NUMERIC(12,2) NOT NULL,
    issued_at    TIMESTAMPTZ,
    due_at       TIMESTAMPTZ
);

CREATE TABLE invoice_lines (
    id           BIGSERIAL PRIMARY KEY,
    invoice_id   BIGINT        NOT NULL REFERENCES invoices (id) ON DELETE CASCADE,
    description  VARCHAR(500)  NOT NULL,
    quantity     INTEGER       NOT NULL CHECK (quantity > 0),
    unit_amount  NUMERIC(12,2) NOT NULL,
    amount       NUMERIC(12,2) NOT NULL
);

CREATE INDEX invoices_account_id_id_idx ON invoices (account_id, id DESC);

CREATE TABLE invoice_number_seq (
    year        INTEGER PRIMARY KEY,
    last_value  INTEGER NOT NULL
);

COMMIT;
