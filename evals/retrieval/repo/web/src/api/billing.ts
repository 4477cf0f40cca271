import { ApiClient } from "./client";

export type InvoiceStatus = "open" | "paid" | "void" | "uncollectible";

export interface InvoiceSummary {
  id: number;
  number: string;
  status: InvoiceStatus;
  currency: string;
  totalMinor: number;
  issuedAt: string;
}

export interface InvoicePage {
  invoices: InvoiceSummary[];
  nextCursor: string | null;
}

export async function fetchInvoices(client: ApiClient, cursor?: string, limit = 25): Promise<InvoicePage> {
  const params = new URLSearchParams({ limit: String(limit) });
  if (cursor) params.set("cursor", cursor);
  const page = await client.get<{ data: any[]; next_cursor: string | null }>(`/invoices?${params}`);
  return {
    invoices: page.data.map((row) => ({
      id: row.id,
      number: row.number,
      status: row.status,
      currency: row.currency,
      totalMinor: row.total_minor,
      issuedAt: row.issued_at,
    })),
    nextCursor: page.next_cursor,
  };
}

// The API answers with a 302 to a signed URL that expires in minutes: open it
// right away, never store it.
export function invoicePdfUrl(baseUrl: string, invoiceId: number): string {
  return `${baseUrl}/invoices/${invoiceId}/pdf`;
}

export async function changePlan(client: ApiClient, plan: "starter" | "team" | "business", seats: number) {
  return client.request<{ effective_at: string; net_minor: number }>("/subscription/plan", {
    method: "PUT",
    body: { plan, seats },
  });
}
