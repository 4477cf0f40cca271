-- 0004: store money as BIGINT minor units instead of NUMERIC(12,2).
-- Runs in one transaction; invoices is small enough that the table rewrite is acceptable.
BEGIN;

ALTER TABLE invoices ADD COLUMN subtotal_minor BIGINT;
ALTER TABLE invoices ADD COLUMN tax_minor      BIGINT;
ALTER TABLE invoices ADD COLUMN total_minor    BIGINT;

-- JPY has no minor unit; everything else we bill in has two decimals.
UPDATE invoices SET
    subtotal_minor = (subtotal * CASE WHEN currency = 'JPY' THEN 1 ELSE 100 END)::BIGINT,
    tax_minor      = (tax      * CASE WHEN currency = 'JPY' THEN 1 ELSE 100 END)::BIGINT,
    total_minor    = (total    * CASE WHEN currency = 'JPY' THEN 1 ELSE 100 END)::BIGINT;

ALTER TABLE invoices
    ALTER COLUMN subtotal_minor SET NOT NULL,
    ALTER COLUMN tax_minor      SET NOT NULL,
    ALTER COLUMN total_minor    SET NOT NULL,
    DROP COLUMN subtotal,
    DROP COLUMN tax,
    DROP COLUMN total;

ALTER TABLE invoice_lines ADD COLUMN unit_amount_minor BIGINT;
ALTER TABLE invoice_lines ADD COLUMN amount_minor      BIGINT;
UPDATE invoice_lines l SET
    unit_amount_minor = (l.unit_amount * 100)::BIGINT,
    amount_minor      = (l.amount * 100)::BIGINT;
ALTER TABLE invoice_lines
    ALTER COLUMN unit_amount_minor SET NOT NULL,
    ALTER COLUMN amount_minor      SET NOT NULL,
    DROP COLUMN unit_amount,
    DROP COLUMN amount;

COMMIT;
