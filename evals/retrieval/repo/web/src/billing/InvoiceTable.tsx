import { useEffect, useState } from "react";

import { ApiClient } from "../api/client";
import { fetchInvoices, invoicePdfUrl, InvoiceStatus, InvoiceSummary } from "../api/billing";
import { formatDate, formatMoney } from "../utils/format";

const STATUS_COLORS: Record<InvoiceStatus, string> = {
  open: "amber",
  paid: "green",
  void: "gray",
  uncollectible: "red",
};

export function statusBadge(status: InvoiceStatus) {
  return <span className={`badge badge-${STATUS_COLORS[status]}`}>{status}</span>;
}

interface Props {
  client: ApiClient;
  baseUrl: string;
}

export function InvoiceTable({ client, baseUrl }: Props) {
  const [rows, setRows] = useState<InvoiceSummary[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);

  useEffect(() => {
    const controller = new AbortController();
    fetchInvoices(client)
      .then((page) => {
        setRows(page.invoices);
        setCursor(page.nextCursor);
      })
      .finally(() => setLoading(false));
    return () => controller.abort();
  }, [client]);

  async function loadMore() {
    if (!cursor) return;
    const page = await fetchInvoices(client, cursor);
    setRows((prev) => [...prev, ...page.invoices]);
    setCursor(page.nextCursor);
  }

  if (loading) return <p>Loading invoices…</p>;
  return (
    <table className="invoice-table">
      <tbody>
        {rows.map((invoice) => (
          <tr key={invoice.id}>
            <td>{invoice.number}</td>
            <td>{formatDate(invoice.issuedAt, { timeZone: "UTC" })}</td>
            <td>{formatMoney(invoice.totalMinor, invoice.currency)}</td>
            <td>{statusBadge(invoice.status)}</td>
            <td>
              <a href={invoicePdfUrl(baseUrl, invoice.id)} target="_blank" rel="noreferrer">PDF</a>
            </td>
          </tr>
        ))}
      </tbody>
      {cursor && <button onClick={loadMore}>Load more</button>}
    </table>
  );
}
