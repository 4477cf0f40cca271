// Fetch wrapper shared by every API module. Handles auth headers, one silent
// refresh on 401, and problem+json errors.
import { SessionStore } from "../auth/session";

export const API_BASE_URL: string = import.meta.env.VITE_API_URL ?? "/api";

export class ApiError extends Error {
  constructor(
    public readonly status: number,
    public readonly code: string,
    public readonly detail?: string,
  ) {
    super(`${status} ${code}`);
  }
}

export interface RequestOptions {
  method?: "GET" | "POST" | "PUT" | "DELETE";
  body?: unknown;
  signal?: AbortSignal;
  retryOnUnauthorized?: boolean;
}

export class ApiClient {
  private refreshing: Promise<boolean> | null = null;

  constructor(private readonly session: SessionStore, private readonly baseUrl = API_BASE_URL) {}

  async request<T>(path: string, options: RequestOptions = {}): Promise<T> {
    const { method = "GET", body, signal, retryOnUnauthorized = true } = options;
    const headers: Record<string, string> = { Accept: "application/json" };
    const token = this.session.getAccessToken();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";

    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "include",
      signal,
    });

    if (response.status === 401 && retryOnUnauthorized && (await this.refreshOnce())) {
      return this.request<T>(path, { ...options, retryOnUnauthorized: false });
    }
    if (!response.ok) {
      const problem = await response.json().catch(() => ({ code: "internal" }));
      throw new ApiError(response.status, problem.code ?? "internal", problem.detail);
    }
    return response.status === 204 ? (undefined as T) : ((await response.json()) as T);
  }

  get<T>(path: string, signal?: AbortSignal): Promise<T> {
    return this.request<T>(path, { signal });
  }

  post<T>(path: string, body?: unknown): Promise<T> {
    return this.request<T>(path, { method: "POST", body });
  }

  // Concurrent 401s share one refresh call; a second refresh would trip reuse detection.
  private refreshOnce(): Promise<boolean> {
    if (!this.refreshing) {
      this.refreshing = fetch(`${this.baseUrl}/auth/refresh`, { method: "POST", credentials: "include" })
        .then(async (res) => {
          if (!res.ok) {
            this.session.clear();
            return false;
          }
          const data = await res.json();
          this.session.setAccessToken(data.access_token);
          return true;
        })
        .finally(() => {
          this.refreshing = null;
        });
    }
    return this.refreshing;
  }
}
