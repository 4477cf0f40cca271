// Where the browser keeps credentials. The access token lives in memory only;
// the refresh token is an httpOnly cookie the JavaScript never sees.

type Listener = (signedIn: boolean) => void;

export class SessionStore {
  private accessToken: string | null = null;
  private listeners = new Set<Listener>();

  getAccessToken(): string | null {
    return this.accessToken;
  }

  setAccessToken(token: string): void {
    this.accessToken = token;
    this.emit(true);
  }

  clear(): void {
    this.accessToken = null;
    this.emit(false);
  }

  isSignedIn(): boolean {
    return this.accessToken !== null;
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private emit(signedIn: boolean): void {
    for (const listener of this.listeners) listener(signedIn);
  }
}

// After a full page reload the memory is empty: call /auth/refresh once at boot
// to get a fresh access token from the cookie.
export async function restoreSession(store: SessionStore, baseUrl: string): Promise<boolean> {
  const res = await fetch(`${baseUrl}/auth/refresh`, { method: "POST", credentials: "include" });
  if (!res.ok) return false;
  const data = await res.json();
  store.setAccessToken(data.access_token);
  return true;
}

export const session = new SessionStore();
