// Display helpers. Amounts arrive as integer minor units (cents) from the API.

const CURRENCY_EXPONENTS: Record<string, number> = { EUR: 2, USD: 2, GBP: 2, JPY: 0 };

export function formatMoney(amountMinor: number, currency: string, locale = navigator.language): string {
  const exponent = CURRENCY_EXPONENTS[currency] ?? 2;
  const major = amountMinor / 10 ** exponent;
  return new Intl.NumberFormat(locale, {
    style: "currency",
    currency,
    minimumFractionDigits: exponent,
    maximumFractionDigits: exponent,
  }).format(major);
}

// Dates are shown in the viewer's zone but invoices are dated in UTC, so an
// invoice issued at 23:30 UTC can show the next day locally. Pass timeZone: "UTC" for invoice dates.
export function formatDate(iso: string, options: Intl.DateTimeFormatOptions = {}, locale = navigator.language): string {
  return new Intl.DateTimeFormat(locale, { dateStyle: "medium", ...options }).format(new Date(iso));
}

export function formatInvoiceNumber(number: string | null): string {
  return number ?? "Draft";
}
