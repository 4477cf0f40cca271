import { useEffect, useState } from "react";

import { ApiClient } from "../api/client";
import { getCurrentUser, User } from "../api/users";
import { session } from "../auth/session";

interface CurrentUserState {
  user: User | null;
  loading: boolean;
  error: Error | null;
}

// Re-fetches whenever the session flips between signed in and signed out.
export function useCurrentUser(client: ApiClient): CurrentUserState {
  const [state, setState] = useState<CurrentUserState>({ user: null, loading: true, error: null });

  useEffect(() => {
    let cancelled = false;
    const load = () => {
      if (!session.isSignedIn()) {
        setState({ user: null, loading: false, error: null });
        return;
      }
      getCurrentUser(client)
        .then((user) => !cancelled && setState({ user, loading: false, error: null }))
        .catch((error) => !cancelled && setState({ user: null, loading: false, error }));
    };
    load();
    const unsubscribe = session.subscribe(load);
    return () => {
      cancelled = true;
      unsubscribe();
    };
  }, [client]);

  return state;
}
